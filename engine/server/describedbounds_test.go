package server

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestDescribedBounds: a schema whose bounds Anthropic's strict-schema
// transform moved into descriptions (what LangChain's ChatAnthropic and the
// Anthropic SDK send) is honoured as if the bounds were keywords: sampled
// replies keep the summary within 40 characters and the topic in its enum.
func TestDescribedBounds(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	// z.object({topic: z.enum([...]), summary: z.string().max(40), sure: z.boolean()})
	// as the Anthropic SDK's transformJSONSchema sends it, and as
	// LangChain's ChatAnthropic 1.5.11 does (enum and $schema described too).
	described := []string{
		`{"type":"object","properties":{"topic":{"enum":["os","path","other"]},"summary":{"type":"string","description":"{maxLength: 40}"},"sure":{"type":"boolean"}},"additionalProperties":false,"required":["topic","summary","sure"]}`,
		`{"type":"object","properties":{"topic":{"type":"string","description":"{enum: [\"os\",\"path\",\"other\"]}"},"summary":{"type":"string","description":"{maxLength: 40}"},"sure":{"type":"boolean"}},"additionalProperties":false,"required":["topic","summary","sure"],"description":"{$schema: \"https://json-schema.org/draft/2020-12/schema\"}"}`,
	}
	plain := map[string]any{"type": "object", "properties": map[string]any{
		"topic": map[string]any{"enum": []any{"os", "path", "other"}}, "summary": map[string]any{"type": "string", "maxLength": 40}, "sure": map[string]any{"type": "boolean"}},
		"additionalProperties": false, "required": []any{"topic", "summary", "sure"}}
	validate := schemaValidator(t, plain)
	for i := range 8 {
		body := fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":160,"temperature":1,"messages":[{"role":"user","content":%q}],"output_config":{"format":{"type":"json_schema","schema":%s}}}`, question, described[i%2])
		status, out, _ := ts.do(t, "POST", "/v1/messages", body)
		text, _ := jpath(out, "content", 0, "text").(string)
		if status != 200 || !json.Valid([]byte(text)) {
			t.Fatalf("reply %d: %d %v", i, status, out)
		}
		if err := validate(text); err != nil {
			t.Errorf("reply %d: %s: %v", i, text, err)
		}
	}
}
