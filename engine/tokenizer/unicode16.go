package tokenizer

import "unicode"

// HF tokenizers 0.23.2 matches \p{L} and \p{N} with Oniguruma's Unicode 16.0
// tables; Go's unicode package is at 15.0. These are the letters and numbers
// Unicode 16.0 added (found by probing tokenizers 0.23.2 with every code point;
// its whitespace class already equals unicode.IsSpace).

var unicode16Letters = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x1c89, Hi: 0x1c8a, Stride: 1},
		{Lo: 0xa7cb, Hi: 0xa7cd, Stride: 1},
		{Lo: 0xa7da, Hi: 0xa7dc, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x105c0, Hi: 0x105f3, Stride: 1},
		{Lo: 0x10d4a, Hi: 0x10d65, Stride: 1},
		{Lo: 0x10d6f, Hi: 0x10d85, Stride: 1},
		{Lo: 0x10ec2, Hi: 0x10ec4, Stride: 1},
		{Lo: 0x11380, Hi: 0x11389, Stride: 1},
		{Lo: 0x1138b, Hi: 0x1138b, Stride: 1},
		{Lo: 0x1138e, Hi: 0x1138e, Stride: 1},
		{Lo: 0x11390, Hi: 0x113b5, Stride: 1},
		{Lo: 0x113b7, Hi: 0x113b7, Stride: 1},
		{Lo: 0x113d1, Hi: 0x113d1, Stride: 1},
		{Lo: 0x113d3, Hi: 0x113d3, Stride: 1},
		{Lo: 0x11bc0, Hi: 0x11be0, Stride: 1},
		{Lo: 0x13460, Hi: 0x143fa, Stride: 1},
		{Lo: 0x16100, Hi: 0x1611d, Stride: 1},
		{Lo: 0x16d40, Hi: 0x16d6c, Stride: 1},
		{Lo: 0x18cff, Hi: 0x18cff, Stride: 1},
		{Lo: 0x1e5d0, Hi: 0x1e5ed, Stride: 1},
		{Lo: 0x1e5f0, Hi: 0x1e5f0, Stride: 1},
		{Lo: 0x2ebf0, Hi: 0x2ee5d, Stride: 1},
	},
}

var unicode16Numbers = &unicode.RangeTable{
	R32: []unicode.Range32{
		{Lo: 0x10d40, Hi: 0x10d49, Stride: 1},
		{Lo: 0x116d0, Hi: 0x116e3, Stride: 1},
		{Lo: 0x11bf0, Hi: 0x11bf9, Stride: 1},
		{Lo: 0x16130, Hi: 0x16139, Stride: 1},
		{Lo: 0x16d70, Hi: 0x16d79, Stride: 1},
		{Lo: 0x1ccf0, Hi: 0x1ccf9, Stride: 1},
		{Lo: 0x1e5f1, Hi: 0x1e5fa, Stride: 1},
	},
}

// unicode16Word lists the characters Unicode 16.0 added to \w of Rust's regex
// crate (Alphabetic, marks, Nd, Pc, Join_Control), which HF tokenizers uses for
// the single_word option of added tokens (found by probing tokenizers 0.23.2).
var unicode16Word = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x0897, Hi: 0x0897, Stride: 1},
		{Lo: 0x1c89, Hi: 0x1c8a, Stride: 1},
		{Lo: 0xa7cb, Hi: 0xa7cd, Stride: 1},
		{Lo: 0xa7da, Hi: 0xa7dc, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x105c0, Hi: 0x105f3, Stride: 1},
		{Lo: 0x10d40, Hi: 0x10d65, Stride: 1},
		{Lo: 0x10d69, Hi: 0x10d6d, Stride: 1},
		{Lo: 0x10d6f, Hi: 0x10d85, Stride: 1},
		{Lo: 0x10ec2, Hi: 0x10ec4, Stride: 1},
		{Lo: 0x10efc, Hi: 0x10efc, Stride: 1},
		{Lo: 0x11380, Hi: 0x11389, Stride: 1},
		{Lo: 0x1138b, Hi: 0x1138b, Stride: 1},
		{Lo: 0x1138e, Hi: 0x1138e, Stride: 1},
		{Lo: 0x11390, Hi: 0x113b5, Stride: 1},
		{Lo: 0x113b7, Hi: 0x113c0, Stride: 1},
		{Lo: 0x113c2, Hi: 0x113c2, Stride: 1},
		{Lo: 0x113c5, Hi: 0x113c5, Stride: 1},
		{Lo: 0x113c7, Hi: 0x113ca, Stride: 1},
		{Lo: 0x113cc, Hi: 0x113d3, Stride: 1},
		{Lo: 0x113e1, Hi: 0x113e2, Stride: 1},
		{Lo: 0x116d0, Hi: 0x116e3, Stride: 1},
		{Lo: 0x11bc0, Hi: 0x11be0, Stride: 1},
		{Lo: 0x11bf0, Hi: 0x11bf9, Stride: 1},
		{Lo: 0x11f5a, Hi: 0x11f5a, Stride: 1},
		{Lo: 0x13460, Hi: 0x143fa, Stride: 1},
		{Lo: 0x16100, Hi: 0x16139, Stride: 1},
		{Lo: 0x16d40, Hi: 0x16d6c, Stride: 1},
		{Lo: 0x16d70, Hi: 0x16d79, Stride: 1},
		{Lo: 0x18cff, Hi: 0x18cff, Stride: 1},
		{Lo: 0x1ccf0, Hi: 0x1ccf9, Stride: 1},
		{Lo: 0x1e5d0, Hi: 0x1e5fa, Stride: 1},
		{Lo: 0x2ebf0, Hi: 0x2ee5d, Stride: 1},
	},
}
