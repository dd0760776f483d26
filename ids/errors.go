package ids

import "errors"

// ErrInvalid is returned (wrapped) by the validating constructors and
// methods of this package when an address or id is malformed.
var ErrInvalid = errors.New("invalid identifier")
