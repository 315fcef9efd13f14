module lazaret.dev/lazaret-guest

go 1.26.0

require (
	golang.org/x/sys v0.50.0
	lazaret.dev/pkg v0.0.0
)

require (
	github.com/fxamacker/cbor/v2 v2.10.0 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/net v0.33.0 // indirect
)

replace lazaret.dev/pkg => ../pkg
