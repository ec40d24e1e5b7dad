package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/spoolhq/spool/engine/config"
	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/internal/fixtures"
)

// byteEOS is the end-of-sequence id of the byte vocabulary.
const byteEOS = 256

// byteVocab has one token per byte value, then an end-of-sequence token.
func byteVocab(t testing.TB) *Vocab {
	t.Helper()
	tokens := make([][]byte, 257)
	for i := range 256 {
		tokens[i] = []byte{byte(i)}
	}
	excluded := make([]bool, 257)
	excluded[byteEOS] = true
	v, err := NewVocab(tokens, excluded, []int{byteEOS})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var (
	fixtureOnce sync.Once
	fixtureTok  *tokenizer.Tokenizer
	fixtureVoc  *Vocab
	fixtureEOS  []int
	fixtureErr  error
)

// fixtureVocab returns the glm52-mini tokenizer and its vocabulary.
func fixtureVocab(t testing.TB) (*tokenizer.Tokenizer, *Vocab) {
	t.Helper()
	dir := fixtures.Path(t, "glm52-mini")
	fixtureOnce.Do(func() {
		var cfg *config.Config
		if cfg, fixtureErr = config.Load(dir); fixtureErr != nil {
			return
		}
		fixtureEOS = cfg.EOSTokenIDs
		if fixtureTok, fixtureErr = tokenizer.Load(dir + "/tokenizer.json"); fixtureErr != nil {
			return
		}
		fixtureVoc, fixtureErr = TokenizerVocab(fixtureTok, fixtureEOS)
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureTok, fixtureVoc
}

func has(mask []uint64, id int) bool { return mask[id>>6]&(1<<(id&63)) != 0 }

func allowedIDs(mask []uint64, n int) []int {
	var ids []int
	for id := range n {
		if has(mask, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// compileFor compiles a test schema; "" means json_object.
func compileFor(t testing.TB, schema string) *Grammar {
	t.Helper()
	if schema == "" {
		return JSONObject()
	}
	g, err := CompileJSONSchema([]byte(schema))
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	return g
}

// validator checks documents against a schema with an independent
// implementation; "" means any JSON object.
func validator(t testing.TB, schema string) func(doc []byte) error {
	t.Helper()
	v, err := newValidator(schema)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newValidator(schema string) (func(doc []byte) error, error) {
	if schema == "" {
		schema = `{"type":"object"}`
	}
	s, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", s); err != nil {
		return nil, err
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		return nil, err
	}
	return func(doc []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}, nil
}

// validPrefix reports whether b can be extended to valid JSON according to
// encoding/json: it either parses or fails only for lack of input.
func validPrefix(b []byte) bool {
	if len(bytes.TrimSpace(b)) == 0 {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var v any
	err := dec.Decode(&v)
	if err == nil {
		// Only whitespace may follow a complete value.
		_, err = dec.Token()
		return errors.Is(err, io.EOF)
	}
	return errors.Is(err, io.ErrUnexpectedEOF)
}
