package store_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/securemsg/storage/store"
	"github.com/stretchr/testify/require"
)

func TestParseLogicalMessageID(t *testing.T) {
	for _, n := range []int{0, 1, store.LogicalMessageIDLen - 1, store.LogicalMessageIDLen + 1, 32} {
		t.Run(fmt.Sprint("length ", n), func(t *testing.T) {
			id, err := store.ParseLogicalMessageID(make([]byte, n))
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Equal(t, store.LogicalMessageID{}, id)
		})
	}
	_, err := store.ParseLogicalMessageID(nil)
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	b := []byte("0123456789abcdef")
	id, err := store.ParseLogicalMessageID(b)
	require.NoError(t, err)
	require.Equal(t, b, id[:])
	b[0] = 'X' // the id is a copy
	require.Equal(t, byte('0'), id[0])
	require.Equal(t, "30313233343536373839616263646566", id.String())
}

func TestNewLogicalMessageID(t *testing.T) {
	seen := map[store.LogicalMessageID]bool{}
	for i := 0; i < 100; i++ {
		id := store.NewLogicalMessageID()
		require.False(t, seen[id])
		require.False(t, bytes.Equal(id[:], make([]byte, store.LogicalMessageIDLen)))
		seen[id] = true
	}
}

func TestDeviceAddressValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addr  store.DeviceAddress
		valid bool
	}{
		{"ok", store.DeviceAddress{UserID: "alice", DeviceID: 1}, true},
		{"device zero", store.DeviceAddress{UserID: "alice", DeviceID: 0}, true},
		{"longest user id", store.DeviceAddress{UserID: strings.Repeat("a", store.MaxUserIDLen), DeviceID: 1}, true},
		{"empty user id", store.DeviceAddress{UserID: "", DeviceID: 1}, false},
		{"negative device id", store.DeviceAddress{UserID: "alice", DeviceID: -1}, false},
		{"over-long user id", store.DeviceAddress{UserID: strings.Repeat("a", store.MaxUserIDLen+1), DeviceID: 1}, false},
		// The limit is in bytes, not characters.
		{"over-long in bytes", store.DeviceAddress{UserID: strings.Repeat("é", store.MaxUserIDLen/2+1), DeviceID: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.addr.Validate()
			if tc.valid {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, store.ErrInvalidArgument)
			}
		})
	}
}

func TestDeviceAddressOrder(t *testing.T) {
	a1 := store.DeviceAddress{UserID: "alice", DeviceID: 1}
	a2 := store.DeviceAddress{UserID: "alice", DeviceID: 2}
	b0 := store.DeviceAddress{UserID: "bob", DeviceID: 0}
	require.True(t, a1.Less(a2))
	require.True(t, a2.Less(b0))
	require.True(t, a1.Less(b0))
	require.False(t, a2.Less(a1))
	require.False(t, a1.Less(a1))
	require.Equal(t, "alice/2", a2.String())
}

// An address's text reaches terminals and logs: a user id that is not
// printable text is written quoted, every such byte escaped, so that a
// user id read from a file cannot forge a log line or drive a terminal;
// one above the longest valid length is cut, so that it cannot flood one.
func TestDeviceAddressStringEscapes(t *testing.T) {
	for _, tc := range []struct{ user, want string }{
		{"alice", "alice/3"},
		{"Zoë Ünal", "Zoë Ünal/3"},
		{"a\nb", `"a\nb"/3`},
		{"\x1b[2J::error file=x::forged", `"\x1b[2J::error file=x::forged"/3`},
		{"evil\u202egnp.exe", `"evil\u202egnp.exe"/3`},
		{"bob\xff\xfe", `"bob\xff\xfe"/3`},
		{strings.Repeat("a", store.MaxUserIDLen), strings.Repeat("a", store.MaxUserIDLen) + "/3"},
		{strings.Repeat("a", 4096), `"` + strings.Repeat("a", 32) + `"…(4096 bytes)/3`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, store.DeviceAddress{UserID: tc.user, DeviceID: 3}.String())
		})
	}
}
