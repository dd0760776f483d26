package reliability_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/internal/sqliteaccess"
	"github.com/securemsg/storage/store"
)

// TestFaultFanoutRollsBack: a fan-out send is one transaction. A storage
// fault on the second device's pending row, on its session write, or on
// the commit leaves the database exactly as it was for every device and
// hands nothing off; the next fan-out, from the stored sessions, reaches
// both devices, which decrypt everything.
func TestFaultFanoutRollsBack(t *testing.T) {
	f := newFaultSetup(t)
	f.send(t, 1)
	to := []store.DeviceAddress{bob, carol}
	for _, tc := range []struct {
		name  string
		fault fault
	}{
		{"second pending row", fault{Op: opStmt, Match: sqlInsertPending, Skip: 1}},
		{"second session", fault{Op: opStmt, Match: sqlInsertSession, Skip: 1}},
		{"commit", fault{Op: opCommit, Match: sqlInsertPending}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := dump(t, sqliteaccess.DB(f.a.sql))
			f.net.ResetCalls()
			f.inj.fail(tc.fault)
			outs, err := f.a.c.SendToDevices(f.ctx, to, store.NewLogicalMessageID(), []byte("never stored"))
			f.requireFault(t, err, "client: send to devices")
			require.NotErrorIs(t, err, client.ErrMessageNotSent, "nothing was stored")
			require.Nil(t, outs)
			f.requireUnchanged(t, before)
			require.Empty(t, f.net.Calls(), "nothing handed off")
		})
	}

	id := store.NewLogicalMessageID()
	outs, err := f.a.c.SendToDevices(f.ctx, to, id, []byte("stored and sent"))
	require.NoError(t, err)
	require.Equal(t, []client.DeviceOutcome{{To: bob}, {To: carol}}, outs)
	for _, d := range []*device{f.b, f.c} {
		res, err := d.c.Poll(f.ctx)
		require.NoError(t, err, "%s decrypts everything: no ratchet state was lost or reused", d.addr)
		var got []string
		for _, r := range res {
			if m, ok := r.(*client.Message); ok {
				got = append(got, string(m.Plaintext))
			}
		}
		require.Contains(t, got, "stored and sent")
		require.NotContains(t, got, "never stored")
		finalizeAll(t, d.c, res)
	}
	exchange(t, f.net, f.a)
	for _, d := range to {
		n, err := f.a.c.PendingMessageCount(f.ctx, &d)
		require.NoError(t, err)
		require.Zero(t, n, "%s acknowledged everything", d)
	}
}
