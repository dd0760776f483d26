// Package linkcheck holds the checks, run as its tests, over the source
// of every package an application links (the root module's packages but
// the tests', tools', examples' and test kits'): that an exported type
// holding key material redacts itself (see TestSecretTypesRedact), and
// that no package carries a test seam, neither an init registration nor
// a package-level hook or state (see TestNoTestSeams) nor a counter only
// something outside its package reads (see TestNoTestCounters).
package linkcheck
