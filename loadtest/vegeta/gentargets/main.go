// Command gentargets writes vegeta JSON targets for seckill orders, one line
// per target, each with a distinct user_id and Idempotency-Key. It can also
// create the item first (-stock) and check it afterwards (-check).
//
//	go run ./gentargets -token $TOKEN -stock 100 -n 5000 > targets.jsonl   # prints the item id on stderr
//	go tool vegeta attack -format=json -lazy -rate=500/s -duration=10s < targets.jsonl | tee results.bin | go tool vegeta report
//	go run ./gentargets -token $TOKEN -check <item id>                    # exit 1 if sold > stock
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// target is vegeta's JSON target format; []byte bodies encode as base64, as vegeta expects.
type target struct {
	Method string              `json:"method"`
	URL    string              `json:"url"`
	Body   []byte              `json:"body"`
	Header map[string][]string `json:"header"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gentargets:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gentargets", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "service base URL (loopback only)")
	token := fs.String("token", os.Getenv("SECKILL_ADMIN_TOKEN"), "admin token (default $SECKILL_ADMIN_TOKEN), for -stock and -check")
	item := fs.Int64("item", 0, "existing item id to target")
	stock := fs.Int("stock", 0, "create a fresh item with this stock and target it")
	strategy := fs.String("strategy", "", "strategy of the created item (empty = server default)")
	n := fs.Int("n", 5000, "number of targets (distinct users)")
	prefix := fs.String("prefix", "", "user id prefix (default: vg-<time>)")
	check := fs.Int64("check", 0, "read this item and exit 1 if sold > stock or remaining != stock - sold")
	if err := fs.Parse(args); err != nil {
		return err
	}
	*base = strings.TrimRight(*base, "/")
	if err := loopback(*base); err != nil {
		return err
	}
	if *check != 0 {
		return checkItem(*base, *token, *check, stdout)
	}
	if *stock > 0 {
		id, err := createItem(*base, *token, *stock, *strategy)
		if err != nil {
			return err
		}
		*item = id
		fmt.Fprintf(stderr, "item %d created with stock %d\n", id, *stock)
	}
	if *item == 0 {
		return fmt.Errorf("need -item or -stock")
	}
	if *prefix == "" {
		*prefix = "vg-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	u := fmt.Sprintf("%s/api/v1/items/%d/orders", *base, *item)
	for i := range *n {
		user := fmt.Sprintf("%s-u%d", *prefix, i)
		body, _ := json.Marshal(map[string]string{"user_id": user})
		if err := enc.Encode(target{Method: http.MethodPost, URL: u, Body: body, Header: map[string][]string{
			"Content-Type":    {"application/json"},
			"Idempotency-Key": {fmt.Sprintf("%s-k%d", *prefix, i)},
		}}); err != nil {
			return err
		}
	}
	return w.Flush()
}

func loopback(base string) error {
	pu, err := url.Parse(base)
	if err != nil {
		return err
	}
	if h := pu.Hostname(); h != "localhost" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("%s is not a loopback address", base)
		}
	}
	return nil
}

type item struct {
	ID        int64 `json:"id"`
	Stock     int   `json:"stock"`
	Sold      int   `json:"sold"`
	Remaining int   `json:"remaining"`
}

func admin(method, u, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func createItem(base, token string, stock int, strategy string) (int64, error) {
	req := map[string]any{"name": "vegeta-" + strconv.FormatInt(time.Now().UnixNano(), 36), "stock": stock, "price_cents": 100}
	if strategy != "" {
		req["strategy"] = strategy
	}
	st, b, err := admin(http.MethodPost, base+"/api/v1/admin/items", token, req)
	if err != nil {
		return 0, err
	}
	var it item
	if st != http.StatusCreated || json.Unmarshal(b, &it) != nil || it.ID == 0 {
		return 0, fmt.Errorf("create item: HTTP %d %s", st, b)
	}
	return it.ID, nil
}

func checkItem(base, token string, id int64, stdout io.Writer) error {
	st, b, err := admin(http.MethodGet, fmt.Sprintf("%s/api/v1/admin/items/%d", base, id), token, nil)
	if err != nil {
		return err
	}
	var it item
	if st != http.StatusOK || json.Unmarshal(b, &it) != nil {
		return fmt.Errorf("read item: HTTP %d %s", st, b)
	}
	fmt.Fprintf(stdout, "item %d: stock %d sold %d remaining %d\n", it.ID, it.Stock, it.Sold, it.Remaining)
	if it.Sold > it.Stock {
		return fmt.Errorf("OVERSOLD: sold %d > stock %d", it.Sold, it.Stock)
	}
	if it.Remaining != it.Stock-it.Sold {
		return fmt.Errorf("remaining %d != stock %d - sold %d", it.Remaining, it.Stock, it.Sold)
	}
	return nil
}
