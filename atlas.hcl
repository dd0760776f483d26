# Atlas project file for the client database's versioned schema.
#
# For people with the Atlas CLI (https://atlasgo.io; it is not installable
# from the Go module proxy, so the project does not depend on it):
#
#   atlas migrate validate --env local   # files match atlas.sum, replay on dev
#   atlas migrate hash     --env local   # after adding a migration
#   atlas migrate lint     --env local --latest 1
#   atlas migrate status   --env local
#
# The project's own command does the same with the Go module ariga.io/atlas
# and needs nothing installed (build it: go -C cmd build -o ../bin/ ./migrate):
#
#   bin/migrate hash                 # rewrite schema/migrations/atlas.sum
#   bin/migrate lint                 # destructive, data-dependent, incompatible
#   bin/migrate plan   -db pending.db
#   bin/migrate up     -db pending.db
#   bin/migrate status -db pending.db
#
# Apply client databases with cmd/migrate, not `atlas migrate apply`: the
# client records its history in its own schema_revision table (package
# migration) and adopts PRAGMA user_version = 14 databases as the v14
# baseline, whereas the CLI keeps its history in atlas_schema_revisions and
# would not see either.

env "local" {
  # The versioned migrations: 14 is the frozen baseline, atlas.sum the
  # integrity file (files ordered by name, as `atlas migrate hash` does).
  migration {
    dir = "file://schema/migrations"
  }

  # A throw-away in-memory SQLite database on which the directory is
  # replayed to compute, check and lint the changes of each file.
  dev = "sqlite://dev?mode=memory"

  # The database the CLI inspects (e.g. for migrate status).
  url = "sqlite://pending.db"

  # The analyzers cmd/migrate lint runs; a finding fails the lint.
  lint {
    destructive {
      error = true
    }
    data_depend {
      error = true
    }
    incompatible {
      error = true
    }
  }
}
