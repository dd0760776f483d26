package client

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/securemsg/storage/internal/nilarg"
	"github.com/securemsg/storage/session"
	"github.com/securemsg/storage/store"
)

// defaultOneTimePrekeys is what a zero Config.OneTimePrekeys means.
const defaultOneTimePrekeys = 20

// defaultMaxFirstContacts and defaultMaxFirstContactPending are what zero
// Config.MaxFirstContacts and MaxFirstContactPending mean: enough for a
// burst of short messages from a new contact, and with every message at
// store.MaxPlaintextSize at most 32 × 100 × 63 KiB, about 197 MiB, pending
// inbound from first contacts.
const (
	defaultMaxFirstContacts       = 32
	defaultMaxFirstContactPending = 100
)

// checkConfig returns cfg with its defaults filled in, or an error
// wrapping store.ErrInvalidArgument that names the first wrong field and
// its value. Every field is checked
// here rather than at its first use (a rotation, a replenishment), which
// would otherwise fail later with a negative count or grace period, or
// panic on a nil pointer.
func checkConfig(cfg Config) (Config, error) {
	for _, f := range []struct {
		name string
		v    any
	}{{"Store", cfg.Store}, {"Transport", cfg.Transport}, {"Directory", cfg.Directory}} {
		if nilarg.Is(f.v) {
			return cfg, configError(f.name, nilValue(f.v), "required")
		}
	}
	// nil means none, but a nil pointer in the interface would panic at
	// its first use.
	if cfg.EncryptPolicy != nil && nilarg.Is(cfg.EncryptPolicy) {
		return cfg, configError("EncryptPolicy", nilValue(cfg.EncryptPolicy), "nil means none, a nil pointer is unusable")
	}
	switch {
	case cfg.OneTimePrekeys < 0:
		return cfg, configError("OneTimePrekeys", cfg.OneTimePrekeys, fmt.Sprintf("negative (zero means %d)", defaultOneTimePrekeys))
	case cfg.OneTimePrekeys > session.MaxOneTimePrekeys:
		return cfg, configError("OneTimePrekeys", cfg.OneTimePrekeys, fmt.Sprintf("at most %d", session.MaxOneTimePrekeys))
	case cfg.OneTimePrekeys == 0:
		cfg.OneTimePrekeys = defaultOneTimePrekeys
	}
	switch {
	case cfg.OneTimePrekeyThreshold < 0:
		return cfg, configError("OneTimePrekeyThreshold", cfg.OneTimePrekeyThreshold, "negative")
	case cfg.OneTimePrekeyThreshold > cfg.OneTimePrekeys:
		return cfg, configError("OneTimePrekeyThreshold", cfg.OneTimePrekeyThreshold, fmt.Sprintf("above the %d one-time prekeys published", cfg.OneTimePrekeys))
	case cfg.OneTimePrekeyThreshold == 0:
		cfg.OneTimePrekeyThreshold = max(cfg.OneTimePrekeys/2, 1)
	}
	switch {
	case cfg.SignedPrekeyGrace < 0:
		return cfg, configError("SignedPrekeyGrace", cfg.SignedPrekeyGrace, "negative")
	case cfg.SignedPrekeyGrace == 0:
		cfg.SignedPrekeyGrace = defaultSignedPrekeyGrace
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{{"MaxFirstContacts", &cfg.MaxFirstContacts, defaultMaxFirstContacts}, {"MaxFirstContactPending", &cfg.MaxFirstContactPending, defaultMaxFirstContactPending}} {
		switch {
		case *f.v < 0:
			return cfg, configError(f.name, *f.v, fmt.Sprintf("negative (zero means %d)", f.def))
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}

// configError is the refusal of Config field name holding value.
func configError(name string, value any, why string) error {
	return fmt.Errorf("client: open: %w: Config.%s %v: %s", store.ErrInvalidArgument, name, value, why)
}

// nilValue describes a nil field: "nil", or the nil pointer's type.
func nilValue(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("(%T)(nil)", v)
}

// LogValue makes slog log the configuration as a group of its settings:
// the type of each interface it is given (Store, Transport, Directory,
// EncryptPolicy; "nil" for none), the counts and grace period, and
// whether Now is set. Both of slog's handlers, text and JSON, log it:
// JSON cannot encode the Now function itself, and the values behind the
// interfaces (a store holding a keyring) are never walked.
func (cfg Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("Store", typeName(cfg.Store)),
		slog.String("Transport", typeName(cfg.Transport)),
		slog.String("Directory", typeName(cfg.Directory)),
		slog.Int("OneTimePrekeys", cfg.OneTimePrekeys),
		slog.Int("OneTimePrekeyThreshold", cfg.OneTimePrekeyThreshold),
		slog.Duration("SignedPrekeyGrace", cfg.SignedPrekeyGrace),
		slog.Int("MaxFirstContacts", cfg.MaxFirstContacts),
		slog.Int("MaxFirstContactPending", cfg.MaxFirstContactPending),
		slog.Bool("Now", cfg.Now != nil),
		slog.String("EncryptPolicy", typeName(cfg.EncryptPolicy)),
	)
}

// typeName is v's dynamic type, or "nil".
func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}
