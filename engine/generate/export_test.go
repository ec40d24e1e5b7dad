package generate

// SetDraftSeam makes d's drafts those f makes of the MTP layer's: a test's
// seam to make drafts miss.
func SetDraftSeam(d *Decoder, f func(draft int) int) { d.drafting.seam = f }
