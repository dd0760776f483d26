package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
)

// TestRunTiny runs the whole benchmark on tiny databases: every line is
// produced and the summary is the last line. The figures mean nothing at
// this size.
func TestRunTiny(t *testing.T) {
	var out bytes.Buffer
	o := options{Small: 200, Mid: 300, Large: 400, Recipients: 5, Iters: 3, DMLIters: 4, SlowIters: 2, OffsetAt: 0.5, Dir: t.TempDir()}
	met, total, err := run(context.Background(), o, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if total != 13 || met > total {
		t.Fatalf("%d of %d targets\n%s", met, total, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !regexp.MustCompile(`^\d+ of 13 targets met$`).MatchString(lines[len(lines)-1]) {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	for _, want := range []string{"page of 100, all recipients", "one recipient", "OFFSET", "count at", "records opened by count", "raw select", "abandon", "ACK-delete", "send", "heap growth", "fan-out to 5 devices"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q line in\n%s", want, out.String())
		}
	}
}

func TestValidate(t *testing.T) {
	for _, o := range []options{
		{Small: 100, Mid: 1000, Large: 1000, Recipients: 10, Iters: 1, DMLIters: 1, SlowIters: 1, OffsetAt: 0.9},
		{Small: 1000, Mid: 1000, Large: 1000, Recipients: 1, Iters: 1, DMLIters: 1, SlowIters: 1, OffsetAt: 0.9},
		{Small: 1000, Mid: 1000, Large: 1000, Recipients: 10, Iters: 1, DMLIters: 1, SlowIters: 1, OffsetAt: 1},
	} {
		if o.validate() == nil {
			t.Errorf("%+v validated", o)
		}
	}
}
