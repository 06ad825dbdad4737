package api

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/pool"
)

// TestClientDecodesLikeEncodingJSON: every type the client decodes, with
// every field set, encoded as the daemon encodes it (encoding/json),
// decodes through the client's unmarshal to exactly what encoding/json
// decodes: the reference the daemon's answers were written against.
func TestClientDecodesLikeEncodingJSON(t *testing.T) {
	for _, v := range []any{
		&pool.Result{}, &Event{}, &pool.Variables{}, &KernelList{},
		&InterruptResponse{}, &ShutdownResponse{}, &Health{}, &ErrorBody{},
	} {
		typ := reflect.TypeOf(v).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			n := 0
			fill(t, reflect.ValueOf(v).Elem(), &n)
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want, got := reflect.New(typ), reflect.New(typ)
			if err := json.Unmarshal(data, want.Interface()); err != nil {
				t.Fatal(err)
			}
			if err := unmarshal(data, got.Interface()); err != nil {
				t.Fatalf("client decode: %v\n%s", err, data)
			}
			if !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Fatalf("client decode differs from encoding/json's\n got %+v\nwant %+v\n%s", got.Elem(), want.Elem(), data)
			}
			if n < 3 {
				t.Fatalf("only %d values filled in %s", n, typ)
			}
		})
	}
}

// fill sets every field reachable from v to a distinct non-zero value
// (strings with escapes and non-ASCII, two elements per slice and map).
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch {
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		v.SetBytes([]byte(`{"k":[1,"x\u00e9",null,true]}`))
		return
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 9, 0, *n, 123456789, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + strconv.Itoa(*n) + " \"quoted\" é\n\t<&>" + strings.Repeat("x", *n%5))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n) * 1001)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(*n) * 1003)
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), n)
		fill(t, v.Index(1), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for i := 0; i < 2; i++ {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, n)
			fill(t, e, n)
			v.SetMapIndex(k, e)
		}
	default:
		t.Fatalf("fill: no rule for %s", v.Type())
	}
}
