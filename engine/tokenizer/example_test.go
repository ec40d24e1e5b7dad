package tokenizer_test

import (
	"fmt"
	"log"
	"path/filepath"

	"github.com/spoolhq/spool/engine/tokenizer"
	"github.com/spoolhq/spool/internal/fixtures"
)

// Encode text to ids and decode them back, as a whole and as a stream.
func Example() {
	tok, err := tokenizer.Load(filepath.Join(fixtures.DemoModel(), "tokenizer.json"))
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("Hello, wörld! 12345")
	fmt.Println(ids)
	for _, id := range ids[:3] {
		s, _ := tok.TokenString(id)
		fmt.Printf("%d %q\n", id, s)
	}
	fmt.Println(tok.Decode(ids, false))

	// A stream decoder never cuts a UTF-8 character in half.
	dec := tok.NewStreamDecoder(false)
	for _, id := range ids {
		fmt.Printf("%q ", dec.Add(id))
	}
	fmt.Printf("%q\n", dec.Flush())

	// Special tokens are single ids, and Decode can leave them out.
	end, _ := tok.TokenID("<|endoftext|>")
	fmt.Println(tok.IsSpecial(end), tok.Decode(append(ids[:2:2], end), true))
	// Output:
	// [39 7310 11 324 127 114 81 2429 0 220 6896 5174]
	// 39 "H"
	// 7310 "ello"
	// 11 ","
	// Hello, wörld! 12345
	// "H" "ello" "," " w" "" "ö" "r" "ld" "!" " " "123" "45" ""
	// true Hello
}
