package client_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/securemsg/storage/client"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
	"github.com/securemsg/storage/store/memstore"
	"github.com/securemsg/storage/transport/transporttest"
)

// configFields are the names of client.Config's fields a refusal can name.
var configFields = []string{
	"Store", "Transport", "Directory", "OneTimePrekeys",
	"OneTimePrekeyThreshold", "SignedPrekeyGrace", "Now", "EncryptPolicy",
}

// A refused Config names the wrong field and its value, once each, and no
// other field; the error wraps ErrInvalidArgument and no store is claimed.
// Fields checked against each other must not blame the wrong one: a
// negative OneTimePrekeys is not reported as a fault of
// OneTimePrekeyThreshold or SignedPrekeyGrace, which the caller left at
// their defaults.
func TestConfigRefusalNamesTheField(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		modify func(*client.Config)
		field  string
		value  string
	}{
		{"nil Store", func(c *client.Config) { c.Store = nil }, "Store", "nil"},
		{"typed-nil Store", func(c *client.Config) { c.Store = (*memstore.Store)(nil) }, "Store", "(*memstore.Store)(nil)"},
		{"nil Transport", func(c *client.Config) { c.Transport = nil }, "Transport", "nil"},
		{"typed-nil Transport", func(c *client.Config) { c.Transport = (*transporttest.Network)(nil) }, "Transport", "(*transporttest.Network)(nil)"},
		{"nil Directory", func(c *client.Config) { c.Directory = nil }, "Directory", "nil"},
		{"typed-nil EncryptPolicy", func(c *client.Config) { c.EncryptPolicy = (*refusingPolicy)(nil) }, "EncryptPolicy", "(*client_test.refusingPolicy)(nil)"},
		{"negative OneTimePrekeys", func(c *client.Config) { c.OneTimePrekeys = -1 }, "OneTimePrekeys", "-1"},
		{"OneTimePrekeys above the maximum", func(c *client.Config) { c.OneTimePrekeys = session.MaxOneTimePrekeys + 1 }, "OneTimePrekeys", strconv.Itoa(session.MaxOneTimePrekeys + 1)},
		{"negative OneTimePrekeyThreshold", func(c *client.Config) { c.OneTimePrekeyThreshold = -3 }, "OneTimePrekeyThreshold", "-3"},
		{"OneTimePrekeyThreshold above the default count", func(c *client.Config) { c.OneTimePrekeyThreshold = 21 }, "OneTimePrekeyThreshold", "21"},
		{"OneTimePrekeyThreshold above OneTimePrekeys", func(c *client.Config) { c.OneTimePrekeys, c.OneTimePrekeyThreshold = 5, 6 }, "OneTimePrekeyThreshold", "6"},
		{"negative SignedPrekeyGrace", func(c *client.Config) { c.SignedPrekeyGrace = -time.Hour }, "SignedPrekeyGrace", "-1h0m0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			net := transporttest.NewNetwork()
			good := client.Config{Store: memstore.New(newKeyring(t)), Transport: net, Directory: net}
			cfg := good
			tt.modify(&cfg)
			c, err := client.Open(ctx, cfg)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			require.Nil(t, c)
			msg := err.Error()
			named := "Config." + tt.field + " " + tt.value + ":"
			require.Equal(t, 1, strings.Count(msg, named), "%q names %q once", msg, named)
			require.Equal(t, 1, strings.Count(msg, tt.value), "%q holds the value once", msg)
			for _, other := range configFields {
				if other != tt.field {
					require.NotRegexp(t, `\b`+other+`\b`, msg, "%q names only the wrong field", msg)
				}
			}

			c, err = client.Open(ctx, good)
			require.NoError(t, err, "the refused Open claimed no store")
			require.NoError(t, c.Close())
		})
	}
}
