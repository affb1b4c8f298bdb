package geminitest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/engine/gemini/geminitest"
)

func post(t *testing.T, ctx context.Context, url, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

const body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"sys"}]}}`

func TestServesInOrderAndRecords(t *testing.T) {
	srv := geminitest.New(t, geminitest.Text("one"), geminitest.Error(503, "busy"))
	url := srv.URL + "/v1beta/models/m1:generateContent"
	code, out, err := post(t, context.Background(), url, body)
	if err != nil || code != 200 {
		t.Fatalf("first: %d %v", code, err)
	}
	var r geminitest.Response
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Candidates[0].Content.Parts[0].Text != "one" || r.Candidates[0].FinishReason != "STOP" {
		t.Fatalf("first reply %s (%v)", out, err)
	}
	if code, _, _ := post(t, context.Background(), url, body); code != 503 {
		t.Fatalf("second: %d, want 503", code)
	}
	code, out, _ = post(t, context.Background(), url, body)
	if code != 400 || !strings.Contains(out, "no scripted reply for request 3") {
		t.Fatalf("third: %d %s", code, out)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Model != "m1" || reqs[0].Action != "generateContent" || reqs[0].APIKey != "k" ||
		reqs[0].System() != "sys" || reqs[0].Texts()[0] != "hi" || reqs[2].N != 3 {
		t.Fatalf("requests = %+v", reqs[0])
	}
}

func TestUnknownRoutes(t *testing.T) {
	srv := geminitest.New(t, geminitest.Text("unused"))
	if code, _, _ := post(t, context.Background(), srv.URL+"/v1/other", body); code != 404 {
		t.Fatalf("code = %d", code)
	}
	if code, _, _ := post(t, context.Background(), srv.URL+"/v1beta/models/m:streamGenerateContent", body); code != 501 {
		t.Fatalf("code = %d", code)
	}
	if len(srv.Requests()) != 0 {
		t.Fatal("unrouted requests must not be recorded or consume replies")
	}
}

func TestHandleFunc(t *testing.T) {
	srv := geminitest.New(t)
	srv.HandleFunc(func(r *geminitest.Request) geminitest.Reply { return geminitest.Text("for " + r.Model) })
	_, out, _ := post(t, context.Background(), srv.URL+"/v1beta/models/m2:generateContent", body)
	if !strings.Contains(out, "for m2") {
		t.Fatalf("reply %s", out)
	}
}

func TestHoldUntilClientCancels(t *testing.T) {
	srv := geminitest.New(t, geminitest.Hold())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(t, ctx, srv.URL+"/v1beta/models/m:generateContent", body)
		errc <- err
	}()
	if r := <-srv.Held(); r.Model != "m" {
		t.Fatalf("held %+v", r)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestCloseReleasesHeld(t *testing.T) {
	srv := geminitest.New(t, geminitest.Hold())
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(t, context.Background(), srv.URL+"/v1beta/models/m:generateContent", body)
		errc <- err
	}()
	<-srv.Held()
	srv.Close() // must not wait forever for the held request
	<-errc
}
