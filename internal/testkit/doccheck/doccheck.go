// Package doccheck holds the test that keeps the project's Markdown
// documents true to the code: every pkg.Ident (and pkg.Type.Member) they
// name exists in that package, every qualifier in their code spans is a
// package (of the modules, the standard library or a dependency), and
// every Go block in README.md and docs/ is a whole file that compiles. It
// has no code of its own.
package doccheck
