package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/securemsg/storage/store"
)

// heapLimit is the most heap a full walk of the queue may leave behind.
const heapLimit = 1 << 20

// heapAfterGC is the live heap: HeapAlloc right after two collections.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// heapLines walk every page of the middle and the large database (all
// recipients, 100 per page) and report the heap left allocated once the
// walk is over and the collector ran: what the library keeps, not the
// garbage the collector had not reclaimed yet.
func heapLines(b *bench) ([]result, error) {
	var rs []result
	for _, e := range []*env{b.mid, b.large} {
		w, err := walkHeap(b.ctx, e)
		if err != nil {
			return nil, err
		}
		rs = append(rs, result{Name: fmt.Sprintf("heap retained after walking all %s pending (pages of 100) and GC", human(e.n)),
			Measured: w.retainedMiB(), Unit: "MiB", Target: "<= 1 MiB", Pass: w.retained() <= heapLimit,
			Detail: fmt.Sprintf("HeapAlloc after GC: %.2f MiB before, %.2f MiB after %d pages", float64(w.before)/(1<<20), float64(w.after)/(1<<20), w.pages)})
	}
	return rs, nil
}

// heapWalk is the live heap before and after one walk of every page.
type heapWalk struct {
	before, after uint64
	pages         int
}

func (w heapWalk) retained() int64      { return int64(w.after) - int64(w.before) }
func (w heapWalk) retainedMiB() float64 { return float64(w.retained()) / (1 << 20) }

// walkHeap walks every page of e (all recipients, 100 per page) between
// two readings of the live heap, and checks the walk saw every message.
func walkHeap(ctx context.Context, e *env) (heapWalk, error) {
	w := heapWalk{before: heapAfterGC()}
	total := 0
	for after := int64(0); ; {
		p, err := e.s.PendingMessages(ctx, store.PageRequest{After: &after, Limit: store.MaxPageSize})
		if err != nil {
			return heapWalk{}, err
		}
		total += len(p.Messages)
		w.pages++
		if p.NextAfterSequence == nil {
			break
		}
		after = *p.NextAfterSequence
	}
	w.after = heapAfterGC()
	if total != e.n {
		return heapWalk{}, fmt.Errorf("%s: heap walk saw %d of %d messages", e.name, total, e.n)
	}
	return w, nil
}

// allocs is what one call allocates on average.
type allocs struct{ bytes, objects float64 }

// allocsPer runs f k times and returns the bytes and objects it
// allocated per call (runtime.MemStats TotalAlloc and Mallocs).
func allocsPer(k int, f func(i int) error) (allocs, error) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i := range k {
		if err := f(i); err != nil {
			return allocs{}, err
		}
	}
	runtime.ReadMemStats(&m1)
	return allocs{bytes: float64(m1.TotalAlloc-m0.TotalAlloc) / float64(k), objects: float64(m1.Mallocs-m0.Mallocs) / float64(k)}, nil
}

// allocLines compare the bytes and allocations of a page at the large
// and the small size, for pages of all recipients and of one, at random
// cursors: the same at any N means no per-queue work hides in a page.
// The small database allocates ~1% fewer objects: Go boxes an int64
// below 256 into an interface without allocating, and a quarter of its
// sequences are below 256.
func allocLines(b *bench) ([]result, error) {
	var rs []result
	k := b.o.Iters
	for _, kind := range []struct {
		name    string
		cursors func(e *env) []cursor
	}{
		{"all recipients", func(e *env) []cursor { return e.globalCursors(b.rng, k) }},
		{"one recipient", func(e *env) []cursor { return e.recipientCursors(b.rng, k) }},
	} {
		var got [2]allocs
		for j, e := range []*env{b.large, b.small} {
			f := e.pageAt(b.ctx, kind.cursors(e))
			if err := f(0); err != nil { // statements prepared, untimed
				return nil, err
			}
			a, err := allocsPer(k, f)
			if err != nil {
				return nil, err
			}
			got[j] = a
		}
		l, s := got[0], got[1]
		rs = append(rs,
			result{Name: fmt.Sprintf("bytes allocated per page, %s: %s / %s pending", kind.name, b.L, b.S), Measured: l.bytes / s.bytes, Unit: "x",
				Target: "<= 1.02", Pass: l.bytes/s.bytes <= 1.02, Detail: fmt.Sprintf("%.0f B vs %.0f B per page of 100", l.bytes, s.bytes)},
			result{Name: fmt.Sprintf("allocations per page, %s: %s / %s pending", kind.name, b.L, b.S), Measured: l.objects / s.objects, Unit: "x",
				Target: "<= 1.05", Pass: l.objects/s.objects <= 1.05, Detail: fmt.Sprintf("%.0f vs %.0f objects per page of 100", l.objects, s.objects)})
	}
	return rs, nil
}
