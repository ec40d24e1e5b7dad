// Package atlas characterises routed experts by topic, the way Colibri's
// Expert Atlas does (c/tools/expert_atlas/analyze.py): it runs a model on a
// few prompts per topic category, counts which experts the router picks,
// and turns the counts into experts.json — per expert the topic mix p, the
// specialization spec = 1 − H(p)/ln C, the top topic, its lift and how
// reliably the expert fired on that topic's prompts.
//
// It reads experts.json files too (Parse), so that the UI can show an atlas
// computed elsewhere. It does not load models or tokenize: callers hand it
// a loaded model and token ids.
package atlas
