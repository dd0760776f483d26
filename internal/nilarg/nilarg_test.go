package nilarg_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/internal/nilarg"
)

func TestIs(t *testing.T) {
	var (
		nilReader *bytes.Reader
		nilFunc   func()
		nilMap    map[string]int
		nilSlice  []byte
		nilChan   chan int
		iface     io.Reader = nilReader
	)
	for _, tt := range []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"typed nil pointer", nilReader, true},
		{"typed nil pointer via interface", iface, true},
		{"nil func", nilFunc, true},
		{"nil map", nilMap, true},
		{"nil slice", nilSlice, true},
		{"nil chan", nilChan, true},
		{"pointer", bytes.NewReader(nil), false},
		{"empty slice", []byte{}, false},
		{"struct value", struct{}{}, false},
		{"int", 0, false},
		{"string", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, nilarg.Is(tt.v))
		})
	}
}
