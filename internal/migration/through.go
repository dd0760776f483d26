package migration

import (
	"fmt"
	"io/fs"
	"strconv"
	"testing/fstest"

	"ariga.io/atlas/sql/migrate"
)

// Through returns a Migrator of m's files up to and including version,
// with atlas.sum computed over them: the directory as it stood when
// version was head. Every file keeps its atlas.sum hash (each is
// cumulative over the files before it), so the history Through's Up
// writes is the one m's Up would. It returns an error wrapping
// ErrDirectory if m has no file of version.
func (m *Migrator) Through(version string) (*Migrator, error) {
	limit, err := strconv.ParseUint(version, 10, 31)
	if err != nil {
		return nil, fmt.Errorf("%w: version %q is not a number", ErrDirectory, version)
	}
	files, err := m.Dir().Files()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDirectory, err)
	}
	fsys := fstest.MapFS{}
	var kept []migrate.File
	for _, f := range files {
		v, err := strconv.ParseUint(f.Version(), 10, 31)
		if err != nil || v > limit {
			continue
		}
		fsys[f.Name()] = &fstest.MapFile{Data: f.Bytes()}
		kept = append(kept, f)
	}
	if len(kept) == 0 || kept[len(kept)-1].Version() != strconv.FormatUint(limit, 10) {
		return nil, fmt.Errorf("%w: no migration file of version %s", ErrDirectory, version)
	}
	sum, err := migrate.NewHashFile(kept)
	if err == nil {
		var text []byte
		text, err = sum.MarshalText()
		fsys[migrate.HashFileName] = &fstest.MapFile{Data: text}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDirectory, err)
	}
	return New(fs.FS(fsys), ".")
}
