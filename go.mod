module github.com/securemsg/storage

go 1.26.4

require (
	ariga.io/atlas v1.3.0
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/stretchr/testify v1.12.1
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
