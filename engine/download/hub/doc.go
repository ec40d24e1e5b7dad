// Package hub is a client for the parts of the Hugging Face Hub HTTP protocol
// that a model download needs: the file manifest of a revision (sizes, git
// blob ids, LFS sha256), ranged downloads through the resolve endpoint and
// its redirects, and the hub's error answers (401/403 gated or private, 404,
// 429, 5xx). It also reads the huggingface_hub environment (HF_ENDPOINT,
// HF_TOKEN and the token file, HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE).
//
// It must not write files, retry, or decide policy: it makes one request per
// call and says precisely what came back. Retries, resume and verification
// belong to package download.
package hub
