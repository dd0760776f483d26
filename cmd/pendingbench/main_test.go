package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunTiny runs the whole benchmark on tiny databases: every line is
// produced, failing lines are listed, and the summary is the last line
// and counts the lines with a target. The figures mean nothing at this
// size.
func TestRunTiny(t *testing.T) {
	var out bytes.Buffer
	o := options{Small: 600, Mid: 700, Large: 900, Recipients: 50, ManyRecipients: 80, Skew: 1.5, Seed: 1, Iters: 3, DMLIters: 4, SlowIters: 2, ColdIters: 2, OffsetAt: 0.5, Dir: t.TempDir()}
	met, total, err := run(context.Background(), o, &out, io.Discard)
	require.NoError(t, err)
	text := out.String()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	m := regexp.MustCompile(`^(\d+) of (\d+) targets met$`).FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, m, "last line %q", lines[len(lines)-1])
	require.Equal(t, strconv.Itoa(met), m[1])
	require.Equal(t, strconv.Itoa(total), m[2])
	require.Equal(t, strings.Count(text, "  pass  ")+strings.Count(text, "  FAIL  "), total, text)
	require.Equal(t, total-met, strings.Count(text, "\nFAIL: "), "every failing line is listed\n%s", text)
	for _, want := range []string{
		"page of 100, all recipients", "page of 100, one recipient", "OFFSET", "count, all recipients: ", "count, one recipient",
		"records opened by count", "abandon", "ACK-delete", "delete (store AbandonPending)",
		"send (client.Send)", "send throughput", "heap retained", "bytes allocated per page", "allocations per page",
		"cold", "fan-out to 5 devices",
		"recipients, page of 100 / SELECT DISTINCT at 900 over 50 recipients", "recipients, every one / SELECT DISTINCT at 900 over 80 recipients",
	} {
		require.Contains(t, text, want, "no %q line", want)
	}
	require.NotContains(t, text, "raw SELECT count(*)", "the count is not compared with the same SQL")

	// The one-recipient page at large / small is information (the schema
	// bounds it); what the store adds to the same query is judged.
	for _, tc := range []struct{ prefix, target, result string }{
		{"page of 100, one recipient: 900 / 600 pending", "-", "info"},
		{"floor: page of 100, one recipient, all in memory", "-", "info"},
		{"page of 100, all recipients / same query raw + 100 Keyring.Open at 900", "<= 1.2", ""},
		{"first page of 100, all recipients / raw floor at 900", "<= 1.2", ""},
		{"page of a recipient with ", "<= 1.3", ""},
		{"count of a recipient with ", "<= 1.3", ""},
		{"abandon (client.AbandonPending) / raw floor at 900", "<= 1.1", ""},
		{"page of 100, one recipient / same query raw + 100 Keyring.Open at 900", "<= 1.3", ""},
		{"recipients, page of 100 / SELECT DISTINCT at 900 over 50 recipients", "<= 1.5", ""},
		{"recipients, every one / SELECT DISTINCT at 900 over 50 recipients", "<= 0.2", ""},
		{"recipients, every one / SELECT DISTINCT at 900 over 80 recipients", "<= 1.1", ""},
		{"recipients, page of 100 / SELECT DISTINCT at 900 over 80 recipients", "<= 1.1", ""},
		{"recipients, every one / SELECT DISTINCT at 900 over 90 recipients", "<= 1.1", ""},
		{"recipients, every one / SELECT DISTINCT at 900 over 1 recipients", "<= 0.1", ""},
		{"recipients, page of 100 / SELECT DISTINCT at 900 over 1 recipients", "<= 1.5", ""},
		// The fan-out's speed-up is judged against its raw floor's, which
		// the cost of a commit on the disk sets.
		{"fan-out to 5 devices: 5 Sends / one SendToDevices", "-", "info"},
		{"floor: 5 raw txs / one raw tx of 5 rows and 5 sessions", "-", "info"},
		{"fan-out to 5 devices: its speed-up / its raw floor's", ">= 0.8", ""},
	} {
		line := tableLine(t, text, tc.prefix)
		if strings.Contains(tc.prefix, "same query raw") {
			require.Contains(t, line, fmt.Sprintf("; %d / %d records opened", 3*100, 3*100), "both sides open the same records")
		}
		cols := regexp.MustCompile(`\s{2,}`).Split(line, -1)
		require.GreaterOrEqual(t, len(cols), 4, cols)
		require.Equal(t, tc.target, cols[2], cols)
		if tc.result != "" {
			require.Equal(t, tc.result, cols[3], cols)
		} else {
			require.Contains(t, []string{"pass", "FAIL"}, cols[3], cols)
		}
	}
}

// tableLine returns the one line of text that starts with prefix.
func tableLine(t *testing.T, text, prefix string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			found = append(found, l)
		}
	}
	require.Len(t, found, 1, "lines starting with %q in\n%s", prefix, text)
	return found[0]
}

func TestValidate(t *testing.T) {
	ok := options{Small: 1000, Mid: 1000, Large: 1000, Recipients: 10, ManyRecipients: 20, Skew: 1.5, Iters: 1, DMLIters: 1, SlowIters: 1, ColdIters: 1, OffsetAt: 0.9}
	require.NoError(t, ok.validate())
	for name, change := range map[string]func(*options){
		"small":      func(o *options) { o.Small = 100 },
		"recipients": func(o *options) { o.Recipients = 1 },
		"many":       func(o *options) { o.ManyRecipients = 1 },
		"offset":     func(o *options) { o.OffsetAt = 1 },
		"skew":       func(o *options) { o.Skew = 0 },
		"cold":       func(o *options) { o.ColdIters = 0 },
		"cold many":  func(o *options) { o.ColdIters = 300 },
	} {
		o := ok
		change(&o)
		require.Error(t, o.validate(), name)
	}
}

func TestPrintTableListsFailures(t *testing.T) {
	var out bytes.Buffer
	met, total := printTable(&out, options{}, []result{
		{Name: "good", Measured: 1, Unit: "x", Target: "<= 2", Pass: true},
		{Name: "bad", Measured: 3, Unit: "x", Target: "<= 2"},
		{Name: "cold thing", Measured: 0.5, Unit: "s", Info: true},
	}, 0)
	require.Equal(t, 1, met)
	require.Equal(t, 2, total)
	text := out.String()
	require.Contains(t, text, "FAIL: bad\n")
	require.NotContains(t, text, "FAIL: good")
	require.NotContains(t, text, "FAIL: cold")
	require.True(t, strings.HasSuffix(text, "1 of 2 targets met\n"), text)
}

// TestInterleaveWith: between runs before every round, the side that goes
// first alternates, and each side's timings come back on its own side.
func TestInterleaveWith(t *testing.T) {
	var calls []string
	side := func(name string, d time.Duration) func(int) error {
		return func(r int) error {
			calls = append(calls, fmt.Sprintf("%s%d", name, r))
			time.Sleep(d)
			return nil
		}
	}
	between := func(r int) error { calls = append(calls, fmt.Sprintf("-%d", r)); return nil }
	sa, sb, err := interleaveWith(4, between, side("a", 0), side("b", 5*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, []string{"-0", "a0", "b0", "-1", "b1", "a1", "-2", "a2", "b2", "-3", "b3", "a3"}, calls)
	require.Len(t, sa, 4)
	require.Len(t, sb, 4)
	for r := range 4 {
		// A sleep lasts at least as long as asked, whatever the load; a's
		// side has no sleep to show, so only b's is checked.
		require.GreaterOrEqual(t, sb[r], 5*time.Millisecond, "round %d: b's sleep timed on b's side", r)
	}
	_, _, err = interleaveWith(3, func(r int) error {
		if r == 1 {
			return errors.New("drain failed")
		}
		return nil
	}, side("a", 0), side("b", 0))
	require.EqualError(t, err, "drain failed")
}

// TestShuffled: every round times every side once, after between, in an
// order that changes from round to round; each side's timings come back
// on its own side.
func TestShuffled(t *testing.T) {
	var calls []string
	side := func(name string, d time.Duration) func(int) (time.Duration, error) {
		return func(r int) (time.Duration, error) {
			calls = append(calls, name)
			return d, nil
		}
	}
	between := func(r int) error { calls = append(calls, "-"); return nil }
	got, err := shuffled(20, rand.New(rand.NewPCG(1, 2)), between, side("a", 1), side("b", 2), side("c", 3))
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, s := range got {
		require.Len(t, s, 20)
		for _, d := range s {
			require.Equal(t, time.Duration(i+1), d)
		}
	}
	orders := map[string]bool{}
	for r := range 20 {
		round := calls[4*r : 4*r+4]
		require.Equal(t, "-", round[0])
		require.ElementsMatch(t, []string{"a", "b", "c"}, round[1:])
		orders[strings.Join(round[1:], "")] = true
	}
	require.Greater(t, len(orders), 3, "the order is drawn anew each round")

	_, err = shuffled(3, rand.New(rand.NewPCG(1, 2)), nil, side("a", 0), func(int) (time.Duration, error) { return 0, errors.New("side failed") })
	require.EqualError(t, err, "side failed")
}
