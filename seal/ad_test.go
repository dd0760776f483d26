package seal

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAD(t *testing.T) {
	require.Equal(t, []byte{0, 0, 0, 2, 'a', 'b', 0, 0, 0, 0, 0, 0, 0, 1, 'c'}, ad([]byte("ab"), nil, []byte("c")))
	require.Empty(t, ad())

	// Different lists of parts never give the same bytes.
	logicalID := [16]byte{0: 1}
	device := binary.BigEndian.AppendUint64(nil, 1)
	for _, tc := range []struct {
		name string
		a, b []byte
	}{
		{"boundary moved", ad([]byte("ab"), []byte("c")), ad([]byte("a"), []byte("bc"))},
		{"empty part added", ad([]byte("a")), ad([]byte("a"), nil)},
		{"user split", MessageAD("alice", 1, logicalID), ad([]byte("alic"), []byte("e"), device, logicalID[:])},
		{"device merged into user", AddressAD("alice", 1), ad(append([]byte("alice"), device...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEqual(t, tc.a, tc.b)
		})
	}
}
