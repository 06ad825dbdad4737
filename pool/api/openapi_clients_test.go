package api

import (
	"reflect"
	"testing"
)

// goClientMethods names the Go client's method(s) for each operation of
// docs/openapi.json. clients/typescript/test/types.test.js and
// clients/python/tests/test_contract.py hold the other clients to the
// same list: an endpoint added to the document without a method in every
// client fails all three.
var goClientMethods = map[string][]string{
	"execute":             {"Execute", "ExecuteStream", "ExecuteLive"},
	"answerToolCall":      {"AnswerToolCall"},
	"listKernels":         {"List", "Listing"},
	"killKernel":          {"Kill"},
	"interruptKernel":     {"Interrupt"},
	"kernelVariables":     {"Variables"},
	"kernelSpill":         {"Spill"},
	"interruptOwner":      {"InterruptOwner"},
	"shutdownOwner":       {"ShutdownOwner"},
	"health":              {"Health"},
	"settings":            {"Settings"},
	"metrics":             {"Metrics"},
	"ready":               {"Ready"},
	"drain":               {"Drain"},
	"drainStatus":         {"DrainStatus"},
	"createSession":       {"CreateSession"},
	"listSessions":        {"Sessions"},
	"getSession":          {"Session"},
	"deleteSession":       {"DeleteSession"},
	"restartSession":      {"RestartSession"},
	"interruptSession":    {"InterruptSession"},
	"sessionVariables":    {"SessionVariables"},
	"fileList":            {"ListFiles"},
	"fileListOwner":       {"ListFiles"},
	"fileListSession":     {"ListFiles"},
	"fileDownload":        {"OpenFile", "DownloadFile"},
	"fileDownloadOwner":   {"OpenFile", "DownloadFile"},
	"fileDownloadSession": {"OpenFile", "DownloadFile"},
	"fileUpload":          {"UploadFile"},
	"fileUploadOwner":     {"UploadFile"},
	"fileUploadSession":   {"UploadFile"},
	"fileDelete":          {"DeleteFile"},
	"fileDeleteOwner":     {"DeleteFile"},
	"fileDeleteSession":   {"DeleteFile"},
}

// Every operation of docs/openapi.json has a method of the Go client.
func TestGoClientCoversEveryOperation(t *testing.T) {
	doc := loadOpenAPI(t)
	client := reflect.TypeFor[*Client]()
	seen := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			seen[op.OperationID] = true
			names, ok := goClientMethods[op.OperationID]
			if !ok {
				t.Errorf("%s %s (%s): no Go client method is listed for it", method, path, op.OperationID)
			}
			for _, name := range names {
				if _, ok := client.MethodByName(name); !ok {
					t.Errorf("%s %s (%s): the Go client has no method %s", method, path, op.OperationID, name)
				}
			}
		}
	}
	for id := range goClientMethods {
		if !seen[id] {
			t.Errorf("goClientMethods lists %s, which docs/openapi.json does not define", id)
		}
	}
}
