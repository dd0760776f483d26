package store_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

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
		{"letters of any script", store.DeviceAddress{UserID: "élise-日本-ñ", DeviceID: 1}, true},
		{"space and punctuation", store.DeviceAddress{UserID: "alice smith@example.org", DeviceID: 1}, true},
		{"emoji", store.DeviceAddress{UserID: "bob😀", DeviceID: 1}, true},
		{"U+FFFD itself", store.DeviceAddress{UserID: "bob\uFFFD", DeviceID: 1}, true},
		{"invalid UTF-8", store.DeviceAddress{UserID: "b\xff\xfe", DeviceID: 1}, false},
		{"truncated UTF-8", store.DeviceAddress{UserID: "bob\xc3", DeviceID: 1}, false},
		{"surrogate half", store.DeviceAddress{UserID: "bob\xed\xa0\x80", DeviceID: 1}, false},
		{"NUL", store.DeviceAddress{UserID: "bob\x00", DeviceID: 1}, false},
		{"newline", store.DeviceAddress{UserID: "bob\nalice", DeviceID: 1}, false},
		{"tab", store.DeviceAddress{UserID: "bob\t", DeviceID: 1}, false},
		{"terminal escape", store.DeviceAddress{UserID: "\x1b[2Jbob", DeviceID: 1}, false},
		{"DEL", store.DeviceAddress{UserID: "bob\x7f", DeviceID: 1}, false},
		{"C1 control", store.DeviceAddress{UserID: "bob\u0085", DeviceID: 1}, false},
		{"bidi override", store.DeviceAddress{UserID: "bob\u202egpj.exe", DeviceID: 1}, false},
		{"zero-width space", store.DeviceAddress{UserID: "bo\u200bb", DeviceID: 1}, false},
		{"line separator", store.DeviceAddress{UserID: "bob\u2028", DeviceID: 1}, false},
		{"invalid and negative device", store.DeviceAddress{UserID: "b\xff", DeviceID: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.addr.Validate()
			if tc.valid {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, store.ErrInvalidArgument)
				// The refusal names the id printably: its text reaches logs.
				require.True(t, utf8.ValidString(err.Error()), "%q", err.Error())
				for _, r := range err.Error() {
					require.True(t, store.UserIDRune(r), "%q", err.Error())
				}
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

	// Compare is the same order, bytes of the user id first (as SQLite's
	// BINARY collation orders them), so a sort by it is a store's order.
	all := []store.DeviceAddress{b0, {UserID: "alice\xff", DeviceID: 0}, a2, {UserID: "Zed", DeviceID: 9}, a1}
	slices.SortFunc(all, store.DeviceAddress.Compare)
	require.Equal(t, []store.DeviceAddress{{UserID: "Zed", DeviceID: 9}, a1, a2, {UserID: "alice\xff", DeviceID: 0}, b0}, all)
	for _, x := range all {
		for _, y := range all {
			require.Equal(t, x.Less(y), x.Compare(y) < 0)
			require.Equal(t, x == y, x.Compare(y) == 0)
			require.Equal(t, -x.Compare(y), y.Compare(x))
		}
	}
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

func TestLogicalMessageIDText(t *testing.T) {
	id := store.LogicalMessageID{0x00, 0x01, 0xab, 0xcd, 0xef, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xff}
	const text = "0001abcdef102030405060708090a0ff"
	for _, tc := range []struct {
		name   string
		format string
		want   string
	}{
		{"%x prints the bytes once", "%x", text},
		{"%X", "%X", strings.ToUpper(text)},
		{"% x spaced", "% x", "00 01 ab cd ef 10 20 30 40 50 60 70 80 90 a0 ff"},
		{"%#x prefixed", "%#x", "0x" + text},
		{"%v", "%v", text},
		{"%+v", "%+v", text},
		{"%s", "%s", text},
		{"%q", "%q", `"` + text + `"`},
		{"width", "%34s|", "  " + text + "|"},
		{"%d the array", "%d", "[0 1 171 205 239 16 32 48 64 80 96 112 128 144 160 255]"},
		{"%#v", "%#v", "store.LogicalMessageID{0x0, 0x1, 0xab, 0xcd, 0xef, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xff}"},
		{"in a struct", "%v", "{" + text + "}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var arg any = id
			if tc.name == "in a struct" {
				arg = struct{ ID store.LogicalMessageID }{id}
			}
			require.Equal(t, tc.want, fmt.Sprintf(tc.format, arg))
		})
	}
	require.Equal(t, text, id.String())

	b, err := id.MarshalText()
	require.NoError(t, err)
	require.Equal(t, text, string(b))
	j, err := json.Marshal(map[string]store.LogicalMessageID{"id": id})
	require.NoError(t, err)
	require.Equal(t, `{"id":"`+text+`"}`, string(j))
	var back map[string]store.LogicalMessageID
	require.NoError(t, json.Unmarshal(j, &back))
	require.Equal(t, id, back["id"])

	for _, tc := range []struct {
		name string
		text string
		ok   bool
	}{
		{"lowercase", text, true},
		{"uppercase", strings.ToUpper(text), true},
		{"empty", "", false},
		{"short", text[:30], false},
		{"long", text + "00", false},
		{"odd", text[:31], false},
		{"not hex", "zz" + text[2:], false},
		{"spaced", " " + text[1:], false},
		{"0x prefix", "0x" + text[2:], false},
		{"the bytes, not the text", string(id[:]), false},
	} {
		t.Run("parse "+tc.name, func(t *testing.T) {
			got, err := store.ParseLogicalMessageIDString(tc.text)
			u := store.LogicalMessageID{0xee}
			uerr := u.UnmarshalText([]byte(tc.text))
			if tc.ok {
				require.NoError(t, err)
				require.NoError(t, uerr)
				require.Equal(t, id, got)
				require.Equal(t, id, u)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.ErrorIs(t, uerr, store.ErrInvalidArgument)
			require.Equal(t, store.LogicalMessageID{}, got)
			require.Equal(t, store.LogicalMessageID{0xee}, u, "a refused text leaves the id unchanged")
		})
	}
	var _ encoding.TextMarshaler = id
	var _ encoding.TextUnmarshaler = &id
}
