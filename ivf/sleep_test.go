package ivf

import "time"

func sleep() { time.Sleep(10 * time.Millisecond) }
