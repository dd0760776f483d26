package sqlitestore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/store"
)

// TestUnpackRecipients: the JSON a range is packed in is read back exactly
// (escapes decoded, the entries counted), and anything else the driver
// could hand back is refused with an error, never a panic or a guess.
func TestUnpackRecipients(t *testing.T) {
	got, read, err := unpackRecipients(`[["a",1,7,2],["b\"\\\/\b\f\n\r\t\u0001\u00e9",0,-3,5]]`, true, nil)
	require.NoError(t, err)
	require.Equal(t, int64(7), read)
	require.Equal(t, []store.PendingRecipient{
		{Recipient: store.DeviceAddress{UserID: "a", DeviceID: 1}, OldestSequence: 7},
		{Recipient: store.DeviceAddress{UserID: "b\"\\/\b\f\n\r\t\x01é", DeviceID: 0}, OldestSequence: -3},
	}, got)
	got, read, err = unpackRecipients(`[]`, true, nil)
	require.NoError(t, err)
	require.Zero(t, read)
	require.Empty(t, got)

	for _, bad := range []string{
		``, `[`, `]`, `[[]]`, `[["a",1,7]]`, `[["a",1,7,2,3]]`, `[["a",1,7,0]]`, `[["a",1,7,2],]`,
		`[["a",1,7,2]["b",1,7,2]]`, `[["a,1,7,2]]`, `[["a\",1,7,2]]`, `[["a\x",1,7,2]]`,
		`[["\u12",1,7,2]]`, `[["\ud800",1,7,2]]`, `[["a",x,7,2]]`, `[["a",1,99999999999999999999,2]]`,
		`[[1,1,7,2]]`, `["a"]`,
	} {
		_, _, err := unpackRecipients(bad, true, nil)
		require.Error(t, err, "%q", bad)
	}
}

// FuzzUnpackRecipients: no input panics, and what is accepted lists one
// recipient per entry read at least once.
func FuzzUnpackRecipients(f *testing.F) {
	f.Add(`[["a",1,7,2]]`)
	f.Add(`[["\u00e9\\",9223372036854775807,-9223372036854775808,1]]`)
	f.Fuzz(func(t *testing.T, packed string) {
		got, read, err := unpackRecipients(packed, true, nil)
		if err == nil && read < int64(len(got)) {
			t.Fatalf("%q: %d recipients from %d entries", packed, len(got), read)
		}
	})
}
