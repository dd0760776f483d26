package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/securemsg/storage/internal/testkit/benchseed"
	"github.com/securemsg/storage/internal/testkit/sealspy"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/transport/transporttest"
)

// bench is one run: the options, the seeded databases and what every
// line needs.
type bench struct {
	ctx               context.Context
	o                 options
	dir               string
	logf              func(format string, args ...any)
	rng               *rand.Rand
	net               *transporttest.Network
	small, mid, large *env
	S, L              string // human sizes of small and large
	// victims hands out the rows the deleting lines delete, so that no
	// two lines pick the same message.
	victims map[*env]*victimSet
}

// line is one measurement of the table: it returns one or more results.
type line struct {
	name string
	run  func(b *bench) ([]result, error)
}

// lines are the measurements, in the order they run and print. A
// measurement defined in another file of this package joins the table
// by being listed here. The cold-cache lines reopen the stores, so they
// come after the warm ones; the send lines write through the raw
// connection, so they come last.
var lines = []line{
	{"heap retained after a full walk", heapLines},
	{"allocations per page", allocLines},
	{"pages at random cursors", pageLines},
	{"in-memory floor of the one-recipient page", floorLines},
	{"OFFSET baseline", offsetLines},
	{"count", countLines},
	{"recipients", recipientLines},
	{"page vs raw select + opens", rawPageLines},
	{"library vs raw floor", libraryFloorLines},
	{"abandon and ACK", deleteLines},
	{"inbound: count, pages, finalize, receive", inboundLines},
	{"structure checks", structureLines},
	{"cold cache", coldLines},
	{"send", sendLines},
	{"keyed send and bounded receive", keyedLines},
	{"fan-out send", fanoutLines},
}

func run(ctx context.Context, o options, out, progress io.Writer) (met, total int, err error) {
	if err := o.validate(); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	dir, err := os.MkdirTemp(o.Dir, "pendingbench-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	b := &bench{ctx: ctx, o: o, dir: dir, rng: rand.New(rand.NewPCG(o.Seed, 0x70656e64)), net: transporttest.NewNetwork(),
		S: human(o.Small), L: human(o.Large)}
	b.logf = func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }

	var envs []*env
	defer func() {
		for _, e := range envs {
			if e.s != nil {
				e.s.Close()
			}
		}
	}()
	for _, x := range []struct {
		name string
		n    int
		dst  **env
	}{{"small", o.Small, &b.small}, {"mid", o.Mid, &b.mid}, {"large", o.Large, &b.large}} {
		e, err := b.seed(x.name, x.n)
		if err != nil {
			return 0, 0, err
		}
		envs = append(envs, e)
		*x.dst = e
	}

	b.victims = map[*env]*victimSet{b.small: newVictims(b.rng, b.small.n), b.large: newVictims(b.rng, b.large.n)}
	var rs []result
	for _, l := range lines {
		if !o.selected(l.name) {
			continue
		}
		b.logf("%s", l.name)
		r, err := l.run(b)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", l.name, err)
		}
		rs = append(rs, r...)
	}
	met, total = printTable(out, o, rs, time.Since(start))
	return met, total, nil
}

// seed builds the database name with n pending messages over a skewed
// spread of -recipients recipients.
func (b *bench) seed(name string, n int) (*env, error) {
	return b.seedOver(name, n, b.o.Recipients)
}

// seedOver builds the database name with n pending messages over a skewed
// spread of recipients (at most n/10).
func (b *bench) seedOver(name string, n, recipients int) (*env, error) {
	return b.seedLayout(name, benchseed.Config{N: n, Recipients: min(recipients, max(2, n/10)), Skew: b.o.Skew})
}

// seedScattered is seedOver with the shares given to the recipients in a
// pseudo-random address order (benchseed.Config.Scatter): the recipients
// holding many messages sit anywhere in address order.
func (b *bench) seedScattered(name string, n, recipients int) (*env, error) {
	return b.seedLayout(name, benchseed.Config{N: n, Recipients: min(recipients, max(2, n/10)), Skew: b.o.Skew, Scatter: true})
}

// seedLayout seeds the database name with cfg's layout.
func (b *bench) seedLayout(name string, cfg benchseed.Config) (*env, error) {
	n := cfg.N
	kr, err := benchseed.NewKeyring()
	if err != nil {
		return nil, err
	}
	keys := sealspy.New(kr)
	cfg = cfg.Normalized()
	layout := cfg.Layout()
	t0 := time.Now()
	path := filepath.Join(b.dir, name+".db")
	s, err := benchseed.OpenLayout(b.ctx, path, keys, layout)
	if err != nil {
		return nil, fmt.Errorf("seed %s: %w", name, err)
	}
	if len(layout.WithAtLeast(store.MaxPageSize+1)) == 0 {
		s.Close()
		return nil, fmt.Errorf("seed %s: no recipient holds a page of %d and its probe row: use more messages", name, store.MaxPageSize)
	}
	shares := layout.Shares()
	b.logf("seeded %s: %d pending over %d recipients (largest %d, median %d, smallest %d) in %s",
		name, n, layout.Recipients(), shares[0], shares[len(shares)/2], shares[len(shares)-1], time.Since(t0).Round(time.Millisecond))
	e := &env{name: name, n: n, path: path, layout: layout, s: s, keys: keys, net: b.net, pragmas: b.o.pragmas()}
	if err := e.applyPragmas(b.ctx); err != nil {
		s.Close()
		return nil, err
	}
	return e, nil
}

// selected reports whether the line named name runs under -only.
func (o options) selected(name string) bool {
	words := pragmaList(o.Only)
	if len(words) == 0 {
		return true
	}
	for _, w := range words {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// pragmaList splits a comma-separated flag.
func pragmaList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
