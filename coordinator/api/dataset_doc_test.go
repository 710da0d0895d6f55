package api_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/edgeagent/coordinator/api"
	"github.com/edgeagent/edgeagent/coordinator/api/apitest"
	"github.com/edgeagent/edgeagent/coordinator/dataset"
	"github.com/edgeagent/edgeagent/coordinator/jobstore"
)

// docTable returns the first cell's backticked names of every row of the
// tables in the section of docs/dataset.md that starts with heading.
func docTable(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/dataset.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/dataset.md has no %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	cell := regexp.MustCompile("^\\| `([^`]+)`")
	var out []string
	for line := range strings.SplitSeq(sec, "\n") {
		if m := cell.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestDatasetDoc: docs/dataset.md lists the dataset's columns in the
// order the API writes them, and the route's parameters as the OpenAPI
// document has them.
func TestDatasetDoc(t *testing.T) {
	if got := docTable(t, "## Columns"); !slices.Equal(got, api.ObservationColumns) {
		t.Errorf("docs/dataset.md columns\n%v\nthe API's\n%v", got, api.ObservationColumns)
	}
	doc, _ := apitest.Doc(t)
	item := doc.Paths.Find(api.ObservationsPattern)
	if item == nil || item.Get == nil {
		t.Fatalf("docs/openapi.yaml has no GET %s", api.ObservationsPattern)
	}
	var params []string
	for _, p := range item.Get.Parameters {
		params = append(params, p.Value.Name)
	}
	if got := docTable(t, "## The route"); !slices.Equal(got, params) {
		t.Errorf("docs/dataset.md parameters %v, docs/openapi.yaml's %v", got, params)
	}
	formats := item.Get.Parameters.GetByInAndName("query", "format").Schema.Value.Enum
	var fs []string
	for _, f := range formats {
		fs = append(fs, f.(string))
	}
	if !slices.Equal(fs, api.ObservationFormats) {
		t.Errorf("docs/openapi.yaml formats %v, the API's %v", fs, api.ObservationFormats)
	}
}

// TestDatasetDocParquetSchema: docs/dataset.md shows the schema a Parquet
// export has (TestObservationsParquet reads it from a file).
func TestDatasetDocParquetSchema(t *testing.T) {
	b, err := os.ReadFile("../../docs/dataset.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Parquet\n")
	if !ok {
		t.Fatal("docs/dataset.md has no section Parquet")
	}
	_, block, _ := strings.Cut(sec, "```text\n")
	block, _, _ = strings.Cut(block, "\n```")
	if block != parquetSchemaText {
		t.Errorf("docs/dataset.md shows the schema\n%s\nthe export's is\n%s", block, parquetSchemaText)
	}
	if got := dataset.ParquetSchema.String(); got != parquetSchemaText {
		t.Errorf("dataset.ParquetSchema\n%s\nwant\n%s", got, parquetSchemaText)
	}
}

// TestEvidenceJSON: the evidence cell of a CSV row is the JSON encoding/json
// writes, whether written directly or, for a string that needs escaping,
// by encoding/json.
func TestEvidenceJSON(t *testing.T) {
	for _, ev := range [][]jobstore.ObservationEvidence{
		nil,
		{{Name: "step-012.xml", Key: "jobs/j-1/g2/step-012.xml", SHA256: strings.Repeat("a", 64)}},
		{{Name: "a.png", Key: "jobs/j/g1/a.png", SHA256: "00"}, {Name: `we"ird<&>`, Key: "k\n", SHA256: "é"}},
	} {
		want, _ := json.Marshal(ev)
		if ev == nil {
			want = []byte("[]")
		}
		v := api.NewObservationView(jobstore.ObservationRow{Evidence: ev})
		rec := v.CSVRecord()
		if got := rec[slices.Index(api.ObservationColumns, "evidence")]; got != string(want) {
			t.Errorf("evidence %q, want %q", got, want)
		}
	}
}
