module github.com/spoolhq/spool/engine/server/conformance/openaigo

go 1.24

require github.com/openai/openai-go v1.12.0

require (
	github.com/tidwall/gjson v1.14.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
)
