package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Reference contenders of the initial sync: what the machine does with the same data when
// nothing of a relay is in the way.
const (
	// BareList reads the paginated JSON list (pages of listPageSize) as bytes and discards
	// them: no decoding into objects, only the list's continue token is read.
	BareList = "bare-list-json"
	// BareProto is BareList in protobuf, the apiserver's cheapest encoding.
	BareProto = "bare-list-proto"
	// MachineLimit is BareList and the ceiling's publishing of the same messages started
	// together on the same machine: objects ÷ max(list time, publish time).
	MachineLimit = "machine-limit"
	// NaiveLean is the naive relay publishing subject and body only: no headers at all.
	NaiveLean = "naive-lean"
)

// Content types of the bare lists.
const (
	contentJSON  = "application/json"
	contentProto = "application/vnd.kubernetes.protobuf"
)

// protoMagic prefixes every protobuf response of the apiserver, before a runtime.Unknown.
var protoMagic = []byte("k8s\x00")

// bareList reads every ConfigMap of namespace as list pages of listPageSize in the given
// content type and discards them. It returns the objects and bytes read; the objects are
// counted without decoding them (protobuf: the items' fields of each page; JSON: each
// page's items by the list's remainingItemCount, see jsonPageItems).
func (e *Env) bareList(ctx context.Context, namespace, contentType string) (objects int, read int64, err error) {
	cfg := rest.CopyConfig(e.rest)
	cfg.AcceptContentTypes, cfg.ContentType = contentType, contentType
	client, err := rest.RESTClientFor(withCoreV1(cfg))
	if err != nil {
		return 0, 0, err
	}
	cont := ""
	remaining := -1 // the previous page's remainingItemCount: unknown before the first page
	for {
		req := client.Get().Namespace(namespace).Resource("configmaps").
			Param("limit", strconv.Itoa(listPageSize)).SetHeader("Accept", contentType)
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.DoRaw(ctx)
		if err != nil {
			return objects, read, fmt.Errorf("list %s: %w", namespace, err)
		}
		read += int64(len(body))
		var items, left int
		if contentType == contentProto {
			items, cont, err = protoPage(body)
			left = -1
		} else {
			cont, left, err = jsonListMeta(body)
			if items = jsonPageItems(remaining, left, cont); items < 0 && err == nil {
				items, err = jsonItems(body)
			}
		}
		if err != nil {
			return objects, read, fmt.Errorf("list %s: page %d: %w", namespace, objects/listPageSize+1, err)
		}
		objects += items
		remaining = left
		if cont == "" {
			return objects, read, nil
		}
	}
}

// withCoreV1 points a REST config at the core group's v1 API, as the typed client does.
func withCoreV1(cfg *rest.Config) *rest.Config {
	cfg.APIPath = "/api"
	gv := configMapResource.GroupVersion()
	cfg.GroupVersion = &gv
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// jsonListMeta reads a JSON list's continue token and remainingItemCount (-1 when absent)
// from its metadata, which the apiserver writes before the items: the decoder stops there
// and the items are never parsed.
func jsonListMeta(body []byte) (cont string, remaining int, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", 0, fmt.Errorf("not a JSON object (%v)", err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", 0, err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", 0, err
			}
			continue
		}
		var meta struct {
			Continue           string `json:"continue"`
			RemainingItemCount *int   `json:"remainingItemCount"`
		}
		if err := dec.Decode(&meta); err != nil {
			return "", 0, err
		}
		if meta.RemainingItemCount == nil {
			return meta.Continue, -1, nil
		}
		return meta.Continue, *meta.RemainingItemCount, nil
	}
	return "", 0, errors.New("no list metadata")
}

// jsonPageItems returns how many items a JSON page held, from the remainingItemCount of the
// previous page (prev, -1 before the first or when absent) and of this one (left): the
// difference, or all that remained for the last page. The first of several pages is full
// (a list without selectors fills every page but the last; bareList's callers check the
// total). It returns -1 when it cannot tell: a single page, or a server that sends no
// remainingItemCount; the caller then counts the items by scanning them (jsonItems).
func jsonPageItems(prev, left int, cont string) int {
	switch {
	case prev >= 0 && cont == "":
		return prev
	case prev >= 0 && left >= 0:
		return prev - left
	case prev < 0 && left >= 0 && cont != "":
		return listPageSize
	}
	return -1
}

// jsonItems counts a JSON list's items by scanning them as raw values, without building
// objects: the fallback of jsonPageItems.
func jsonItems(body []byte) (int, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// protoPage counts the items of a protobuf list page and reads its continue token, walking
// the wire format without decoding any object: runtime.Unknown's raw (field 2) holds the
// ConfigMapList, whose metadata is field 1 (ListMeta: continue is field 3) and whose items
// are field 2.
func protoPage(body []byte) (items int, cont string, err error) {
	if !bytes.HasPrefix(body, protoMagic) {
		return 0, "", errors.New("not a protobuf response")
	}
	raw, err := protoField(body[len(protoMagic):], 2)
	if err != nil {
		return 0, "", fmt.Errorf("envelope: %w", err)
	}
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, "", protowire.ParseError(n)
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			items++
		}
		if num == 1 && typ == protowire.BytesType {
			meta, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return 0, "", protowire.ParseError(m)
			}
			if c, err := protoField(meta, 3); err == nil {
				cont = string(c)
			}
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return 0, "", protowire.ParseError(m)
		}
		b = b[m:]
	}
	return items, cont, nil
}

// protoField returns the first length-delimited field num of a message.
func protoField(msg []byte, num protowire.Number) ([]byte, error) {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil, protowire.ParseError(l)
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			return v, nil
		}
		m := protowire.ConsumeFieldValue(n, typ, msg)
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		msg = msg[m:]
	}
	return nil, fmt.Errorf("no field %d", num)
}

// syncBare is the bare list reference of the initial sync over n objects of namespace.
func (e *Env) syncBare(ctx context.Context, namespace string, n int, contentType string) TimedRun {
	m := e.meter()
	got, read, err := e.bareList(ctx, namespace, contentType)
	run := TimedRun{Events: n, Took: time.Since(m.start), ServerCPU: m.servers(), Bytes: read, Err: errString(err)}
	if err == nil && got != n {
		run.Err = fmt.Sprintf("listed %d objects, want %d", got, n)
	}
	return run
}

// syncMachineLimit starts the bare JSON list of namespace and the ceiling's publishing of
// msgs (the same objects' messages) together and waits for both: objects ÷ the longer of the
// two is what the machine allows a relay that overlapped reading and publishing perfectly.
func (e *Env) syncMachineLimit(ctx context.Context, namespace string, msgs []*nats.Msg) TimedRun {
	nm := namesFor(Ceiling)
	run := TimedRun{Events: len(msgs)}
	if err := e.freshStream(ctx, nm); err != nil {
		run.Err = err.Error()
		return run
	}
	defer e.dropStream(context.WithoutCancel(ctx), nm)
	var (
		wg                sync.WaitGroup
		listed            int
		listErr, pubErr   error
		listTook, pubTook time.Duration
	)
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		t0 := time.Now()
		listed, run.Bytes, listErr = e.bareList(ctx, namespace, contentJSON)
		listTook = time.Since(t0)
	})
	wg.Go(func() {
		<-start
		pubTook, pubErr = e.publishAll(ctx, msgs)
	})
	m := e.meter()
	close(start)
	wg.Wait()
	run.ServerCPU = m.servers()
	run.ListTook, run.PublishTook = listTook, pubTook
	run.Took = max(listTook, pubTook)
	switch {
	case listErr != nil:
		run.Err = "list: " + listErr.Error()
	case pubErr != nil:
		run.Err = "publish: " + pubErr.Error()
	case listed != len(msgs):
		run.Err = fmt.Sprintf("listed %d objects, want %d", listed, len(msgs))
	}
	return run
}
