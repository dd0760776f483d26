package sqlitestore

// SetOpeningHook makes every read run f between reading sealed values and
// opening them, until the returned function is called.
func SetOpeningHook(f func()) (restore func()) {
	openingHook = f
	return func() { openingHook = nil }
}
