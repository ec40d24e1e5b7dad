package atlas

// Category is a topic and the probe questions asked about it.
type Category struct {
	Name      string
	Questions []string
}

// DemoCategories are the probe questions for the demo model, which was
// trained on Python docstrings, documentation and code and answers "What
// does X do?": six topics of the standard library, four questions each.
func DemoCategories() []Category {
	return []Category{
		{"text", []string{
			"What does the function re.compile do?",
			"What does the method str.split do?",
			"What does the function textwrap.fill do?",
			"What does the method str.join do?",
		}},
		{"files", []string{
			"What does the function os.path.join do?",
			"What does the function shutil.copyfile do?",
			"What does the method pathlib.Path.glob do?",
			"What does the function os.listdir do?",
		}},
		{"math", []string{
			"What does the function math.sqrt do?",
			"What does the function statistics.mean do?",
			"What does the function random.choice do?",
			"What does the class fractions.Fraction do?",
		}},
		{"network", []string{
			"What does the function urllib.request.urlopen do?",
			"What does the class socket.socket do?",
			"What does the class http.client.HTTPConnection do?",
			"What does the function urllib.parse.urlencode do?",
		}},
		{"time", []string{
			"What does the method datetime.datetime.now do?",
			"What does the function time.sleep do?",
			"What does the function calendar.monthrange do?",
			"What does the method datetime.date.isoformat do?",
		}},
		{"collections", []string{
			"What does the class collections.Counter do?",
			"What does the function itertools.chain do?",
			"What does the function heapq.heappush do?",
			"What does the function functools.lru_cache do?",
		}},
	}
}
