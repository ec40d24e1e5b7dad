package jsonvalue

// Lookup follows keys into v: a string key indexes an object, an int key an
// array. It returns nil when a step finds no object or array, an absent key
// or an index out of range.
func Lookup(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		default:
			return nil
		}
	}
	return v
}
