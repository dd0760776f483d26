//go:build !linux

package legacy_test

import "testing"

// evict cannot drop a file from the page cache portably outside Linux:
// there the benchmark's open starts warm (BENCHMARKS.md figures are from
// Linux).
func evict(b *testing.B, _ string) {
	b.Helper()
	b.Log("page cache eviction is Linux only: this open starts warm")
}
