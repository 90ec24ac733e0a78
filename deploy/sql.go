package deploy

import _ "embed"

// DistanceSQL creates schema vecside and its exact distance functions over
// real[]; it can be run again safely.
//
//go:embed sql/distance.sql
var DistanceSQL string
