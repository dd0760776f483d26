package transport

import "errors"

// Sentinel errors, wrapped with context; test them with errors.Is.
var (
	// ErrNoBundle is returned by Directory.Fetch when the device has not
	// published a bundle.
	ErrNoBundle = errors.New("no bundle published")
	// ErrEnvelopeTooLarge is returned by Send for an envelope above
	// session.MaxEnvelopeSize, or an empty one.
	ErrEnvelopeTooLarge = errors.New("envelope empty or too large")
)
