//go:build !linux

package rpc

import "net"

// detectsClientGone says whether clientGone can tell anything here: not
// on this platform, where a search whose client left runs until it ends
// or its timeout passes.
const detectsClientGone = false

func clientGone(net.Conn) bool { return false }
