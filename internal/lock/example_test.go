package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/lock"
)

func exampleRedis() (*redis.Client, string) {
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		panic(err)
	}
	return redis.NewClient(opt), "example:" + fmt.Sprint(time.Now().UnixNano())
}

func cleanupExample(rdb *redis.Client, key string) {
	ctx := context.Background()
	keys, _ := rdb.Keys(ctx, "*"+key+"*").Result()
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
	_ = rdb.Close()
}

func Example() {
	ctx := context.Background()
	rdb, prefix := exampleRedis()
	defer cleanupExample(rdb, prefix)
	locker := lock.New(rdb, nil)
	defer locker.Close()

	key := prefix + ":{item:42}:lock"
	l, err := locker.Obtain(ctx, key, 5*time.Second, &lock.Options{Wait: 3 * time.Second})
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	// Do the work under l.Context(); guard writes with l.Fence().
	fmt.Println("fence > 0:", l.Fence() > 0)

	_, err = locker.Obtain(ctx, key, 5*time.Second, nil)
	fmt.Println("second try:", errors.Is(err, lock.ErrNotObtained))

	fmt.Println("release:", l.Release(ctx))
	fmt.Println("release again is not held:", errors.Is(l.Release(ctx), lock.ErrNotHeld))
	// Output:
	// fence > 0: true
	// second try: true
	// release: <nil>
	// release again is not held: true
}

func ExampleOwner_ReleaseAll() {
	ctx := context.Background()
	rdb, prefix := exampleRedis()
	defer cleanupExample(rdb, prefix)
	locker := lock.New(rdb, nil)
	defer locker.Close()

	session := lock.NewOwner()
	opt := &lock.Options{Owner: session, Reentrant: true}
	outer, _ := locker.Obtain(ctx, prefix+":a", time.Minute, opt)
	inner, _ := locker.Obtain(ctx, prefix+":a", time.Minute, opt) // re-entry
	_, _ = locker.Obtain(ctx, prefix+":b", time.Minute, opt)
	fmt.Println("tracked:", len(session.Locks()), "fences rise:", inner.Fence() > outer.Fence())

	fmt.Println("release all:", session.ReleaseAll(ctx), "tracked:", len(session.Locks()))
	// Output:
	// tracked: 3 fences rise: true
	// release all: <nil> tracked: 0
}

func ExampleLock_Context() {
	ctx := context.Background()
	rdb, prefix := exampleRedis()
	defer cleanupExample(rdb, prefix)
	locker := lock.New(rdb, nil)
	defer locker.Close()

	l, err := locker.Obtain(ctx, prefix, 50*time.Millisecond, nil)
	if err != nil {
		panic(err)
	}
	<-l.Context().Done() // the work under the lock would stop here, a little before the TTL
	fmt.Println(context.Cause(l.Context()))
	time.Sleep(20 * time.Millisecond) // now past the TTL
	fmt.Println(l.Release(ctx))
	// Output:
	// lock: lease may have lapsed
	// lock: not held: expired
}

// Fences stay monotonic when Redis loses the counter: FenceFloor reports the
// highest fence the guarded resource has stored (here a variable standing
// for SELECT lock_fence FROM items WHERE id = ?).
func ExampleOptions_fenceFloor() {
	ctx := context.Background()
	rdb, prefix := exampleRedis()
	defer cleanupExample(rdb, prefix)
	locker := lock.New(rdb, nil)
	defer locker.Close()

	key := prefix + ":{item:7}:lock"
	stored := int64(41) // the resource has accepted fences up to 41
	opt := &lock.Options{FenceFloor: func(context.Context) (int64, error) { return stored, nil }}

	rdb.Del(ctx, key+":fence") // Redis lost the counter
	l, err := locker.Obtain(ctx, key, 5*time.Second, opt)
	if err != nil {
		fmt.Println("busy:", err)
		return
	}
	fmt.Println("fence:", l.Fence())
	_ = l.Release(ctx)
	// Output:
	// fence: 42
}
