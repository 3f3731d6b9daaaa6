package api

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// shares bounds how many upload slots each tenant (namespace) holds at
// once, so that one tenant's uploads, however slow, leave slots for others.
// A tenant's semaphore lives while an upload of it holds or waits for one.
type shares struct {
	each int64

	mu sync.Mutex
	m  map[string]*share
}

type share struct {
	sem   *semaphore.Weighted
	users int
}

func (s *shares) get(tenant string) *share {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*share{}
	}
	sh := s.m[tenant]
	if sh == nil {
		sh = &share{sem: semaphore.NewWeighted(s.each)}
		s.m[tenant] = sh
	}
	sh.users++
	return sh
}

func (s *shares) put(tenant string, sh *share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh.users--; sh.users == 0 {
		delete(s.m, tenant)
	}
}

// tryAcquire takes one of tenant's slots if one is free now. Nil shares
// bound nothing.
func (s *shares) tryAcquire(tenant string) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	sh := s.get(tenant)
	if !sh.sem.TryAcquire(1) {
		s.put(tenant, sh)
		return nil, false
	}
	return func() { sh.sem.Release(1); s.put(tenant, sh) }, true
}

// acquire waits until ctx ends for one of tenant's slots.
func (s *shares) acquire(ctx context.Context, tenant string) (release func(), err error) {
	sh := s.get(tenant)
	if err := sh.sem.Acquire(ctx, 1); err != nil {
		s.put(tenant, sh)
		return nil, err
	}
	return func() { sh.sem.Release(1); s.put(tenant, sh) }, nil
}
