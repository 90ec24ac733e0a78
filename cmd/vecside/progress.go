package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/vecside/vecside/replicate"
)

// copyProgress is how serve shows the progress of table copies: a bar
// per table when f is a terminal; nil elsewhere, and the replicator then
// logs a line every 5 s, which a log collector keeps and a bar would
// fill with carriage returns.
func copyProgress(f *os.File) func(replicate.CopyProgress) {
	if !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return newCopyBars(f).report
}

// copyBars draws a bar for each table being copied: rows read against
// the planner's estimate (a spinner when there is none), then the build
// that follows.
type copyBars struct {
	w    io.Writer
	mu   sync.Mutex
	bars map[string]*progressbar.ProgressBar
}

func newCopyBars(w io.Writer) *copyBars {
	return &copyBars{w: w, bars: map[string]*progressbar.ProgressBar{}}
}

func (cb *copyBars) report(p replicate.CopyProgress) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	bar := cb.bars[p.Table]
	if bar == nil {
		total := p.Estimate
		if total <= 0 {
			total = -1
		}
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(cb.w), progressbar.OptionSetDescription("copying "+p.Table),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(250*time.Millisecond), progressbar.OptionSetWidth(30))
		cb.bars[p.Table] = bar
	}
	if max := bar.GetMax64(); max > 0 && p.Rows > max {
		bar.ChangeMax64(p.Rows) // the estimate was low
	}
	bar.Set64(p.Rows)
	switch p.Phase {
	case replicate.PhaseBuilding:
		bar.Describe("building the index of " + p.Table)
	case replicate.PhaseDone:
		// The bar gives way to a line that stays, on a line erased whole
		// (ESC [2K): a shorter line drawn over a bar would leave its end.
		bar.Exit()
		fmt.Fprintf(cb.w, "\r\x1b[2Kcopied %s: %d rows in %s\n", p.Table, p.Rows, p.Elapsed.Round(time.Millisecond))
		delete(cb.bars, p.Table)
	}
}
