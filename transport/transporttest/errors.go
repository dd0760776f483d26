package transporttest

import "errors"

// ErrInjected is returned for a failure injected with FailNextSends,
// FailNextReceives, FailNextPublishes or FailNextFetches.
var ErrInjected = errors.New("injected failure")
