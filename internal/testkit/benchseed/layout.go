package benchseed

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/securemsg/storage/store"
)

// Layout is the assignment of a seeded database's rows to recipients,
// with each recipient's rows in sequence order, so that benchmarks can
// draw a recipient and a cursor anywhere in its queue without reading the
// database.
//
// The even layout (Config.Skew zero) is Config.Row. The skewed layout
// gives recipient r (0-based) a share proportional to (r+1)^-Skew, at
// least one row, and scatters every recipient's rows over the whole
// sequence in a fixed pseudo-random order: with 1,000,000 rows over 1,000
// recipients and Skew 1.5, recipient 0 holds ~390,000 rows, the first
// eleven more than 10,000 each, and the last ones a dozen. Recipients with no
// room (N below Recipients) are dropped from the end. Recipient r's
// address is Recipient(r), or with Config.Scatter another recipient
// number, the same for every r of one Config.
type Layout struct {
	cfg Config
	// recipient[i] is the recipient of row i.
	recipient []int32
	// rows[r] are the rows of recipient r, ascending.
	rows [][]int32
	// addr[r] is the number of recipient r's address (Recipient); nil
	// means r itself.
	addr []int
}

// Layout returns the layout of c's rows. Config must be Normalized.
func (c Config) Layout() *Layout {
	l := &Layout{cfg: c, recipient: make([]int32, 0, c.N)}
	if c.Skew <= 0 {
		for i := range c.N {
			r, _ := c.Row(i)
			l.recipient = append(l.recipient, int32(recipientNumber(r)))
		}
		l.buildRows(c.Recipients)
		return l
	}
	shares := skewedShares(c.N, c.Recipients, c.Skew)
	for r, n := range shares {
		for range n {
			l.recipient = append(l.recipient, int32(r))
		}
	}
	rng := rand.New(rand.NewPCG(uint64(c.N), uint64(len(shares))))
	rng.Shuffle(len(l.recipient), func(i, j int) { l.recipient[i], l.recipient[j] = l.recipient[j], l.recipient[i] })
	l.buildRows(len(shares))
	if c.Scatter {
		l.addr = rng.Perm(len(shares))
	}
	return l
}

// recipientNumber inverts Recipient for the even layout's addresses.
func recipientNumber(a store.DeviceAddress) int {
	n := 0
	for _, ch := range a.UserID[len("bench-user-"):] {
		n = n*10 + int(ch-'0')
	}
	return n
}

func (l *Layout) buildRows(recipients int) {
	l.rows = make([][]int32, recipients)
	counts := make([]int, recipients)
	for _, r := range l.recipient {
		counts[r]++
	}
	for r := range l.rows {
		l.rows[r] = make([]int32, 0, counts[r])
	}
	for i, r := range l.recipient {
		l.rows[r] = append(l.rows[r], int32(i))
	}
}

// skewedShares splits n rows over at most recipients recipients, recipient
// r getting about n*(r+1)^-s/H and at least one row, the rounding
// remainder going to recipient 0.
func skewedShares(n, recipients int, s float64) []int {
	recipients = max(1, min(recipients, n))
	h := 0.0
	for r := range recipients {
		h += math.Pow(float64(r+1), -s)
	}
	shares := make([]int, recipients)
	total := 0
	for r := range shares {
		shares[r] = max(1, int(math.Round(float64(n)*math.Pow(float64(r+1), -s)/h)))
		total += shares[r]
	}
	// Rounding up the tail may overshoot: take from the largest shares.
	for total > n {
		i := 0
		for j := range shares {
			if shares[j] > shares[i] {
				i = j
			}
		}
		take := min(total-n, shares[i]-1)
		shares[i] -= take
		total -= take
	}
	shares[0] += n - total
	return shares
}

// N is the number of rows.
func (l *Layout) N() int { return l.cfg.N }

// Recipients is the number of recipients holding at least one row.
func (l *Layout) Recipients() int { return len(l.rows) }

// Address is recipient r's address.
func (l *Layout) Address(r int) store.DeviceAddress {
	if l.addr != nil {
		return Recipient(l.addr[r])
	}
	return Recipient(r)
}

// Share is the number of rows recipient r holds.
func (l *Layout) Share(r int) int { return len(l.rows[r]) }

// RecipientRow is the row of recipient r's k-th message (0-based).
func (l *Layout) RecipientRow(r, k int) int { return int(l.rows[r][k]) }

// Row returns the recipient and logical id of row i, which has sequence
// i+1 in a freshly seeded database.
func (l *Layout) Row(i int) (store.DeviceAddress, store.LogicalMessageID) {
	return l.Address(int(l.recipient[i])), RowID(i)
}

// WithAtLeast returns the recipients holding at least n rows, in order.
func (l *Layout) WithAtLeast(n int) []int {
	var out []int
	for r := range l.rows {
		if len(l.rows[r]) >= n {
			out = append(out, r)
		}
	}
	return out
}

// Shares returns every recipient's share, largest first.
func (l *Layout) Shares() []int {
	out := make([]int, len(l.rows))
	for r := range l.rows {
		out[r] = len(l.rows[r])
	}
	slices.SortFunc(out, func(a, b int) int { return b - a })
	return out
}
