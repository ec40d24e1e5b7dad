package remotefront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/access"
	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/status"
	"github.com/spoolhq/spool/engine/turn"
)

// Config is what a Front needs of the server it runs in.
type Config struct {
	// Client is the remote engine. Its owner runs Client.Run.
	Client *remote.Client
	// Names are the server's own model names: a request naming one of
	// them, or none, goes to the remote's first model.
	Names []string
	// MaxTokens, when positive, caps a translated request's max_tokens.
	MaxTokens int
	// KeepAlive is the silence after which a stream gets a keep-alive.
	KeepAlive time.Duration
}

// Front answers the API's endpoints by forwarding to a remote engine.
type Front struct {
	cfg Config
	rc  *remote.Client
}

// New returns the front of cfg.Client.
func New(cfg Config) (*Front, error) {
	if cfg.Client == nil {
		return nil, errors.New("remotefront: a remote front needs a remote engine")
	}
	if cfg.KeepAlive <= 0 {
		return nil, errors.New("remotefront: Config needs a positive KeepAlive")
	}
	return &Front{cfg: cfg, rc: cfg.Client}, nil
}

// writeError answers err in the envelope of the request's path.
func (f *Front) writeError(w http.ResponseWriter, r *http.Request, err error) {
	apiwire.WriteError(w, r.URL.Path, f.failed(r, turn.Error(err)))
}

// failed notes e, answered to r's client (in a body or as a stream's
// error event), in the request's access record, and returns it. A request
// whose context the server ended with an answer (a stopping server:
// turn.Stopped) is answered that instead.
func (f *Front) failed(r *http.Request, e *apiwire.Error) *apiwire.Error {
	if stop := stopCause(r); stop != nil {
		e = stop
	}
	return access.Fail(r.Context(), e)
}

// stopCause is the answer the server ended r's context with (it is
// stopping), or nil: a client that left is not answered.
func stopCause(r *http.Request) *apiwire.Error { return turn.Stopped(r.Context()) }

// Stats answers GET /stats of a remote server. There is no memory plan
// or expert map: those describe a local engine.
func (f *Front) Stats(w http.ResponseWriter, r *http.Request) {
	st := f.rc.Status()
	out := map[string]any{
		"engine": map[string]any{"kind": "remote", "state": status.RemotePhase(st), "remote": st},
	}
	if len(st.Models) > 0 {
		out["model"] = ModelObject(st.Models[0])
	}
	if st.Last != nil {
		out["last_turn"] = st.Last
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	out["memory"] = map[string]any{"go_heap_bytes": mem.HeapAlloc, "go_sys_bytes": mem.Sys}
	apiwire.WriteJSON(w, http.StatusOK, out)
}

// remoteModel resolves the model a request names to one the remote
// serves: a remote id as is; no model, Spool's own names (and another
// vendor's name, anyModel: Claude's on /v1/messages) the remote's first
// model.
func (f *Front) remoteModel(ctx context.Context, id string, anyModel bool) (string, error) {
	isDefault := func(m string) bool {
		return slices.Contains(f.cfg.Names, m) || (anyModel && m == id)
	}
	model, ok, err := f.rc.Resolve(ctx, id, isDefault)
	if err != nil {
		return "", err
	}
	if !ok {
		var ids []string
		for _, m := range f.rc.Status().Models {
			ids = append(ids, fmt.Sprintf("%q", m.ID))
		}
		return "", apiwire.NotFound("model_not_found", "the model %q does not exist; the remote engine serves %s", id, strings.Join(ids, ", "))
	}
	return model, nil
}

// apiError maps a remote failure to the error answered to the
// client. The remote's own 4xx answers keep their status and fields; its
// 5xx answers, and failures to reach it, are the gateway's (502, 503,
// 504), so that a client can tell them from its own mistakes.
func (f *Front) apiError(err error) *apiwire.Error {
	var re *remote.Error
	if !errors.As(err, &re) {
		return turn.Error(err)
	}
	e := &apiwire.Error{Type: "server_error", Message: re.Message, RetryAfter: re.RetryAfterSeconds()}
	switch re.Kind {
	case remote.KindUnreachable:
		e.Status, e.Code, e.RetryAfter = http.StatusBadGateway, "remote_unreachable", max(e.RetryAfter, 1)
	case remote.KindTimeout:
		e.Status, e.Code = http.StatusGatewayTimeout, "remote_timeout"
	case remote.KindAuth:
		e.Status, e.Code = http.StatusBadGateway, "remote_auth_failed"
	case remote.KindProtocol:
		e.Status, e.Code = http.StatusBadGateway, "remote_protocol_error"
	default:
		e.Status, e.Type, e.Code, e.Param = re.Status, re.Type, re.Code, re.Param
		switch {
		case remote.IsContextExceeded(re):
			e.Code = "context_length_exceeded"
		case re.Status == http.StatusServiceUnavailable || re.Status == http.StatusTooManyRequests:
			e.RetryAfter = max(e.RetryAfter, 1)
		case re.Status >= 500:
			e.Status, e.Code = http.StatusBadGateway, "remote_error"
			e.Message = fmt.Sprintf("the remote engine failed (%d %s): %s", re.Status, http.StatusText(re.Status), re.Message)
		case re.Status == http.StatusNotFound && e.Code == "" && strings.Contains(strings.ToLower(re.Message), "model"):
			e.Code = "model_not_found"
		}
		if e.Status < 400 || e.Status > 599 {
			e.Status = http.StatusBadGateway
		}
	}
	return e
}

// ModelObject is one remote model as /v1/models lists it: the
// remote's entry, with context_length and max_model_len where known.
func ModelObject(m remote.Model) map[string]any {
	out := map[string]any{}
	if len(m.Raw) > 0 {
		json.Unmarshal(m.Raw, &out)
	}
	out["id"] = m.ID
	if _, ok := out["object"]; !ok {
		out["object"] = "model"
	}
	if m.ContextLength > 0 {
		out["context_length"] = m.ContextLength
		out["max_model_len"] = m.ContextLength
	}
	return out
}

// anthropicModel is a remote model in Anthropic's shape.
func anthropicModel(m remote.Model) anthropic.Model {
	return anthropic.NewModel(m.ID, time.Unix(m.Created, 0), m.ContextLength, 0)
}

// Models answers GET /v1/models: the remote's models, in Anthropic's
// shape to an Anthropic client (apiwire.WantsAnthropic).
func (f *Front) Models(w http.ResponseWriter, r *http.Request) {
	models, err := f.rc.Models(r.Context())
	if err != nil {
		apiwire.WriteModelError(w, r, f.failed(r, f.apiError(err)))
		return
	}
	if apiwire.WantsAnthropic(r) {
		list := make([]anthropic.Model, len(models))
		for i, m := range models {
			list[i] = anthropicModel(m)
		}
		apiwire.WriteJSON(w, http.StatusOK, anthropic.NewModelList(list))
		return
	}
	data := make([]map[string]any, 0, len(models))
	for _, m := range models {
		data = append(data, ModelObject(m))
	}
	apiwire.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// Model answers GET /v1/models/{id} of a remote model.
func (f *Front) Model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	models, err := f.rc.Models(r.Context())
	if err != nil {
		apiwire.WriteModelError(w, r, f.failed(r, f.apiError(err)))
		return
	}
	for _, m := range models {
		if m.ID == id {
			if apiwire.WantsAnthropic(r) {
				apiwire.WriteJSON(w, http.StatusOK, anthropicModel(m))
				return
			}
			apiwire.WriteJSON(w, http.StatusOK, ModelObject(m))
			return
		}
	}
	apiwire.WriteModelError(w, r, f.failed(r, apiwire.NotFound("model_not_found", "the model %q does not exist on the remote engine", id)))
}
