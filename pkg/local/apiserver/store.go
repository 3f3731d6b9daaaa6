package apiserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	bolt "go.etcd.io/bbolt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Store keeps objects in a bbolt file with the semantics of the Kubernetes
// apiserver that sless's code relies on, so the REST API and the reconcilers
// run on it as they do on a cluster:
//
//   - resourceVersion is a store-wide counter bumped by every write; an
//     update or patch carrying a stale one fails with 409 Conflict, one
//     without any is unconditional (as for custom resources);
//   - metadata.generation starts at 1 and grows when anything but metadata
//     and status changes (and when deletion starts);
//   - status is a subresource: Create and Update ignore it, Status().Update
//     and Status().Patch change only it;
//   - Delete of an object with finalizers sets deletionTimestamp; the object
//     goes when an update removes the last finalizer; new finalizers cannot
//     be added once deletion started;
//   - deleting an owner deletes the objects whose ownerReferences name it
//     (background propagation), as Kubernetes garbage collection would;
//   - errors are apimachinery's StatusErrors (NotFound, AlreadyExists,
//     Conflict, BadRequest, Invalid), so apierrors.IsNotFound and friends work.
//
// Every committed change is handed to the subscribers (see Subscribe) in
// commit order, which is how the local controllers learn what to reconcile.
type Store struct {
	db     *bolt.DB
	scheme *runtime.Scheme
	mapper meta.RESTMapper
	now    func() time.Time

	// writeMu orders commits and their notifications.
	writeMu sync.Mutex
	subsMu  sync.RWMutex
	subs    map[int]func(Event)
	nextSub int
}

var _ client.Client = (*Store)(nil)

// Event is one committed change.
type Event struct {
	Type watch.EventType
	GVK  schema.GroupVersionKind
	Key  types.NamespacedName
	// Object is the object after the change (before it, for Deleted).
	Object *unstructured.Unstructured
}

var (
	bucketObjects = []byte("objects")
	bucketMeta    = []byte("meta")
	keyRevision   = []byte("resourceVersion")
)

// clusterScoped are the kinds the store keeps without a namespace.
var clusterScoped = map[string]bool{"Namespace": true}

// Open opens (creating if needed) the store file at path. Every kind the
// scheme knows can be stored.
func Open(path string, scheme *runtime.Scheme) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open %s: another sless dev is using this data directory", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketObjects); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketMeta)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	mapper := meta.NewDefaultRESTMapper(scheme.PrioritizedVersionsAllGroups())
	for gvk := range scheme.AllKnownTypes() {
		if strings.HasSuffix(gvk.Kind, "List") || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		scope := meta.RESTScopeNamespace
		if clusterScoped[gvk.Kind] {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvk, scope)
	}
	return &Store{db: db, scheme: scheme, mapper: mapper, now: time.Now, subs: map[int]func(Event){}}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Subscribe calls fn with every change committed from now on, in commit
// order, on the writer's goroutine: fn must not block or write to the store
// (hand the event to a queue). The returned function unsubscribes.
func (s *Store) Subscribe(fn func(Event)) (cancel func()) {
	s.subsMu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = fn
	s.subsMu.Unlock()
	return func() {
		s.subsMu.Lock()
		delete(s.subs, id)
		s.subsMu.Unlock()
	}
}

func (s *Store) publish(events []Event) {
	if len(events) == 0 {
		return
	}
	s.subsMu.RLock()
	defer s.subsMu.RUnlock()
	for _, ev := range events {
		for _, fn := range s.subs {
			fn(ev)
		}
	}
}

// Scheme is the scheme the store decodes with.
func (s *Store) Scheme() *runtime.Scheme { return s.scheme }

// RESTMapper maps the scheme's kinds; all but Namespace are namespaced.
func (s *Store) RESTMapper() meta.RESTMapper { return s.mapper }

// GroupVersionKindFor is the kind of obj by the scheme.
func (s *Store) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, s.scheme)
}

// IsObjectNamespaced says whether obj's kind lives in namespaces.
func (s *Store) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	gvk, err := s.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	return !clusterScoped[gvk.Kind], nil
}

// kindInfo is what the store needs to know of one kind.
type kindInfo struct {
	gvk        schema.GroupVersionKind
	resource   schema.GroupResource
	namespaced bool
}

func (s *Store) kindOf(obj runtime.Object) (kindInfo, error) {
	gvk, err := s.GroupVersionKindFor(obj)
	if err != nil {
		return kindInfo{}, err
	}
	if _, isList := obj.(client.ObjectList); isList || (strings.HasSuffix(gvk.Kind, "List") && meta.IsListType(obj)) {
		gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return kindInfo{gvk: gvk, resource: plural.GroupResource(), namespaced: !clusterScoped[gvk.Kind]}, nil
}

// bucket is where the objects of one kind live (version-independent: the
// store holds one version of each kind).
func (k kindInfo) bucket() []byte {
	return []byte(k.gvk.Group + "/" + k.gvk.Kind)
}

func (k kindInfo) key(ns, name string) []byte {
	if !k.namespaced {
		ns = ""
	}
	return []byte(ns + "/" + name)
}

// Get reads one object.
func (s *Store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	k, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	var raw []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects).Bucket(k.bucket())
		if b != nil {
			raw = bytes.Clone(b.Get(k.key(key.Namespace, key.Name)))
		}
		return nil
	}); err != nil {
		return err
	}
	if raw == nil {
		return apierrors.NewNotFound(k.resource, key.Name)
	}
	return decodeInto(raw, obj)
}

// List reads the objects of a kind, sorted by namespace and name, with
// label and field (metadata.name, metadata.namespace) selectors and
// Limit/Continue paging.
func (s *Store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	k, err := s.kindOf(list)
	if err != nil {
		return err
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	match, err := matcher(o)
	if err != nil {
		return err
	}
	prefix := []byte{}
	if o.Namespace != "" && k.namespaced {
		prefix = []byte(o.Namespace + "/")
	}
	start := prefix
	if o.Continue != "" {
		after, err := base64.RawURLEncoding.DecodeString(o.Continue)
		if err != nil || !bytes.HasPrefix(after, prefix) {
			return apierrors.NewBadRequest("invalid continue token")
		}
		start = append(after, 0)
	}
	var items []json.RawMessage
	var rv uint64
	cont := ""
	if err := s.db.View(func(tx *bolt.Tx) error {
		rv = storeRevision(tx)
		b := tx.Bucket(bucketObjects).Bucket(k.bucket())
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for key, v := c.Seek(start); key != nil && bytes.HasPrefix(key, prefix); key, v = c.Next() {
			if o.Limit > 0 && int64(len(items)) == o.Limit {
				cont = base64.RawURLEncoding.EncodeToString(bytes.Clone(lastKey(k, items)))
				return nil
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(v); err != nil {
				return err
			}
			if match(u) {
				items = append(items, bytes.Clone(v))
			}
		}
		return nil
	}); err != nil {
		return err
	}
	listKind := k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List")
	doc, err := json.Marshal(map[string]any{
		"apiVersion": listKind.GroupVersion().String(),
		"kind":       listKind.Kind,
		"metadata":   map[string]any{"resourceVersion": strconv.FormatUint(rv, 10), "continue": cont},
		"items":      nonNil(items),
	})
	if err != nil {
		return err
	}
	return decodeInto(doc, list)
}

func nonNil(items []json.RawMessage) []json.RawMessage {
	if items == nil {
		return []json.RawMessage{}
	}
	return items
}

// lastKey is the store key of the last item, where a next page starts after.
func lastKey(k kindInfo, items []json.RawMessage) []byte {
	var m struct {
		Metadata struct{ Namespace, Name string }
	}
	_ = json.Unmarshal(items[len(items)-1], &m)
	return k.key(m.Metadata.Namespace, m.Metadata.Name)
}

func matcher(o *client.ListOptions) (func(*unstructured.Unstructured) bool, error) {
	sel := o.LabelSelector
	fsel := o.FieldSelector
	if o.Raw != nil {
		var err error
		if o.Raw.LabelSelector != "" {
			if sel, err = labels.Parse(o.Raw.LabelSelector); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
		if o.Raw.FieldSelector != "" {
			if fsel, err = fields.ParseSelector(o.Raw.FieldSelector); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
	}
	if fsel != nil {
		for _, r := range fsel.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
			}
		}
	}
	return func(u *unstructured.Unstructured) bool {
		if sel != nil && !sel.Matches(labels.Set(u.GetLabels())) {
			return false
		}
		if fsel != nil && !fsel.Matches(fields.Set{"metadata.name": u.GetName(), "metadata.namespace": u.GetNamespace()}) {
			return false
		}
		return true
	}, nil
}

// Create stores a new object. The server sets uid, creationTimestamp,
// generation and resourceVersion; status is dropped (it is a subresource).
func (s *Store) Create(_ context.Context, obj client.Object, opts ...client.CreateOption) error {
	o := (&client.CreateOptions{}).ApplyOptions(opts)
	k, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	u, err := toUnstructured(obj, k)
	if err != nil {
		return err
	}
	if u.GetResourceVersion() != "" {
		return apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if u.GetName() == "" {
		if u.GetGenerateName() == "" {
			return apierrors.NewInvalid(k.gvk.GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
		}
		u.SetName(u.GetGenerateName() + randomSuffix())
	}
	if k.namespaced && u.GetNamespace() == "" {
		return apierrors.NewBadRequest("the namespace of the object must be set")
	}
	if !k.namespaced {
		u.SetNamespace("")
	}
	now := metav1.NewTime(s.now().UTC().Truncate(time.Second))
	u.SetUID(uuid.NewUUID())
	u.SetCreationTimestamp(now)
	u.SetDeletionTimestamp(nil)
	u.SetDeletionGracePeriodSeconds(nil)
	u.SetGeneration(1)
	u.SetManagedFields(nil)
	delete(u.Object, "status")
	if err := applyDefaults(k.gvk, u.Object); err != nil {
		return err
	}
	dry := len(o.DryRun) > 0
	err = s.write(dry, func(tx *bolt.Tx, rv uint64) ([]Event, error) {
		b, err := tx.Bucket(bucketObjects).CreateBucketIfNotExists(k.bucket())
		if err != nil {
			return nil, err
		}
		key := k.key(u.GetNamespace(), u.GetName())
		if b.Get(key) != nil {
			return nil, apierrors.NewAlreadyExists(k.resource, u.GetName())
		}
		u.SetResourceVersion(strconv.FormatUint(rv, 10))
		raw, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return []Event{{Type: watch.Added, GVK: k.gvk, Key: nsName(u), Object: u}}, b.Put(key, raw)
	})
	if err != nil {
		return err
	}
	return fromUnstructured(u, obj)
}

// Update replaces an object's metadata and spec, keeping its status.
func (s *Store) Update(_ context.Context, obj client.Object, opts ...client.UpdateOption) error {
	o := (&client.UpdateOptions{}).ApplyOptions(opts)
	return s.update(obj, false, len(o.DryRun) > 0)
}

// update writes obj over the stored object: its status only when status is
// true, everything else otherwise.
func (s *Store) update(obj client.Object, status, dry bool) error {
	k, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	in, err := toUnstructured(obj, k)
	if err != nil {
		return err
	}
	var out *unstructured.Unstructured
	err = s.write(dry, func(tx *bolt.Tx, rv uint64) ([]Event, error) {
		b, key, raw, err := stored(tx, k, in.GetNamespace(), in.GetName())
		if err != nil {
			return nil, err
		}
		old := &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		if want := in.GetResourceVersion(); want != "" && want != old.GetResourceVersion() {
			return nil, conflict(k, in.GetName())
		}
		next, err := s.merge(k, old, in, status)
		if err != nil {
			return nil, err
		}
		out = next
		return s.commitUpdate(tx, b, k, key, old, next, rv)
	})
	if err != nil {
		return err
	}
	return fromUnstructured(out, obj)
}

// merge computes the object an update of old with in stores.
func (s *Store) merge(k kindInfo, old, in *unstructured.Unstructured, status bool) (*unstructured.Unstructured, error) {
	// Defaults as the apiserver applies them: on what is written, and on
	// what was stored before a default existed, so that such a default alone
	// is no change of the spec (and no new generation).
	if err := applyDefaults(k.gvk, old.Object); err != nil {
		return nil, err
	}
	var next *unstructured.Unstructured
	if status {
		next = old.DeepCopy()
		if st, ok := in.Object["status"]; ok {
			next.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(next.Object, "status")
		}
		return next, nil
	}
	next = in.DeepCopy()
	if err := applyDefaults(k.gvk, next.Object); err != nil {
		return nil, err
	}
	if st, ok := old.Object["status"]; ok {
		next.Object["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(next.Object, "status")
	}
	// Fields the server owns.
	next.SetNamespace(old.GetNamespace())
	next.SetUID(old.GetUID())
	next.SetCreationTimestamp(old.GetCreationTimestamp())
	next.SetDeletionTimestamp(old.GetDeletionTimestamp())
	next.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	next.SetGeneration(old.GetGeneration())
	next.SetManagedFields(nil)
	if next.GetName() != old.GetName() {
		return nil, apierrors.NewBadRequest("the name of the object does not match the name in the request")
	}
	if old.GetDeletionTimestamp() != nil {
		had := map[string]bool{}
		for _, f := range old.GetFinalizers() {
			had[f] = true
		}
		for _, f := range next.GetFinalizers() {
			if !had[f] {
				return nil, apierrors.NewInvalid(k.gvk.GroupKind(), old.GetName(),
					field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted, found new finalizers "+strconv.Quote(f))})
			}
		}
	}
	if !reflect.DeepEqual(withoutMeta(old.Object), withoutMeta(next.Object)) {
		next.SetGeneration(old.GetGeneration() + 1)
	}
	return next, nil
}

// commitUpdate stores next in place of old: nothing when they are equal (a
// no-op update keeps its resourceVersion, as on the apiserver), the removal of
// the object when deletion started and no finalizer is left.
// stored finds an existing object inside a write transaction: its kind's
// bucket, its key and its JSON, or NotFound as the apiserver says it.
func stored(tx *bolt.Tx, k kindInfo, ns, name string) (*bolt.Bucket, []byte, []byte, error) {
	b := tx.Bucket(bucketObjects).Bucket(k.bucket())
	key := k.key(ns, name)
	var raw []byte
	if b != nil {
		raw = b.Get(key)
	}
	if raw == nil {
		return nil, nil, nil, apierrors.NewNotFound(k.resource, name)
	}
	return b, key, raw, nil
}

func (s *Store) commitUpdate(tx *bolt.Tx, b *bolt.Bucket, k kindInfo, key []byte, old, next *unstructured.Unstructured, rv uint64) ([]Event, error) {
	next.SetResourceVersion(old.GetResourceVersion())
	if reflect.DeepEqual(old.Object, next.Object) {
		return nil, errNoChange
	}
	next.SetResourceVersion(strconv.FormatUint(rv, 10))
	if next.GetDeletionTimestamp() != nil && len(next.GetFinalizers()) == 0 {
		return s.remove(tx, k, next)
	}
	raw, err := next.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return []Event{{Type: watch.Modified, GVK: k.gvk, Key: nsName(next), Object: next}}, b.Put(key, raw)
}

// errNoChange ends a write transaction that changed nothing.
var errNoChange = errors.New("no change")

// Patch applies a JSON merge patch or JSON patch (custom resources take no
// strategic merge patches). A patch that names a resourceVersion is checked
// against the stored one.
func (s *Store) Patch(_ context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	o := (&client.PatchOptions{}).ApplyOptions(opts)
	return s.patch(obj, patch, false, len(o.DryRun) > 0)
}

func (s *Store) patch(obj client.Object, patch client.Patch, status, dry bool) error {
	k, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	var out *unstructured.Unstructured
	err = s.write(dry, func(tx *bolt.Tx, rv uint64) ([]Event, error) {
		b, key, raw, err := stored(tx, k, ns, name)
		if err != nil {
			return nil, err
		}
		var patched []byte
		switch patch.Type() {
		case types.MergePatchType:
			patched, err = jsonpatch.MergePatch(raw, data)
		case types.JSONPatchType:
			var p jsonpatch.Patch
			if p, err = jsonpatch.DecodePatch(data); err == nil {
				patched, err = p.Apply(raw)
			}
		default:
			return nil, apierrors.NewGenericServerResponse(415, "patch", k.resource, name,
				fmt.Sprintf("the patch type %q is not supported; use a JSON merge patch or a JSON patch", patch.Type()), 0, false)
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the patch cannot be applied: %v", err))
		}
		old := &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		in := &unstructured.Unstructured{}
		if err := in.UnmarshalJSON(patched); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the patched object is not valid: %v", err))
		}
		if want := in.GetResourceVersion(); want != "" && want != old.GetResourceVersion() {
			return nil, conflict(k, name)
		}
		next, err := s.merge(k, old, in, status)
		if err != nil {
			return nil, err
		}
		out = next
		return s.commitUpdate(tx, b, k, key, old, next, rv)
	})
	if err != nil {
		return err
	}
	return fromUnstructured(out, obj)
}

// Delete deletes an object, or starts its deletion when it has finalizers.
func (s *Store) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	k, err := s.kindOf(obj)
	if err != nil {
		return err
	}
	var out *unstructured.Unstructured
	err = s.write(len(o.DryRun) > 0, func(tx *bolt.Tx, rv uint64) ([]Event, error) {
		b, key, raw, err := stored(tx, k, obj.GetNamespace(), obj.GetName())
		if err != nil {
			return nil, err
		}
		cur := &unstructured.Unstructured{}
		if err := cur.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		if p := o.Preconditions; p != nil {
			if p.UID != nil && *p.UID != cur.GetUID() {
				return nil, apierrors.NewConflict(k.resource, obj.GetName(),
					fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, cur.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
				return nil, apierrors.NewConflict(k.resource, obj.GetName(),
					fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, cur.GetResourceVersion()))
			}
		}
		out = cur
		if len(cur.GetFinalizers()) > 0 {
			if cur.GetDeletionTimestamp() != nil {
				return nil, errNoChange
			}
			now := metav1.NewTime(s.now().UTC().Truncate(time.Second))
			zero := int64(0)
			cur.SetDeletionTimestamp(&now)
			cur.SetDeletionGracePeriodSeconds(&zero)
			cur.SetGeneration(cur.GetGeneration() + 1)
			cur.SetResourceVersion(strconv.FormatUint(rv, 10))
			raw, err := cur.MarshalJSON()
			if err != nil {
				return nil, err
			}
			return []Event{{Type: watch.Modified, GVK: k.gvk, Key: nsName(cur), Object: cur}}, b.Put(key, raw)
		}
		if o.PropagationPolicy != nil && *o.PropagationPolicy == metav1.DeletePropagationOrphan {
			return []Event{{Type: watch.Deleted, GVK: k.gvk, Key: nsName(cur), Object: cur}}, b.Delete(key)
		}
		return s.remove(tx, k, cur)
	})
	if err != nil {
		return err
	}
	return fromUnstructured(out, obj)
}

// remove deletes an object and, like the garbage collector with background
// propagation, the objects it owns (which start deleting if they have
// finalizers).
func (s *Store) remove(tx *bolt.Tx, k kindInfo, u *unstructured.Unstructured) ([]Event, error) {
	if err := tx.Bucket(bucketObjects).Bucket(k.bucket()).Delete(k.key(u.GetNamespace(), u.GetName())); err != nil {
		return nil, err
	}
	events := []Event{{Type: watch.Deleted, GVK: k.gvk, Key: nsName(u), Object: u}}
	uid := u.GetUID()
	type dependent struct {
		k kindInfo
		u *unstructured.Unstructured
	}
	var deps []dependent
	err := tx.Bucket(bucketObjects).ForEachBucket(func(name []byte) error {
		b := tx.Bucket(bucketObjects).Bucket(name)
		prefix := []byte(u.GetNamespace() + "/")
		c := b.Cursor()
		for key, v := c.Seek(prefix); key != nil && bytes.HasPrefix(key, prefix); key, v = c.Next() {
			if !bytes.Contains(v, []byte(uid)) {
				continue
			}
			d := &unstructured.Unstructured{}
			if err := d.UnmarshalJSON(v); err != nil {
				return err
			}
			for _, ref := range d.GetOwnerReferences() {
				if ref.UID == uid {
					gv, _ := schema.ParseGroupVersion(d.GetAPIVersion())
					dk := kindInfo{gvk: gv.WithKind(d.GetKind()), namespaced: true}
					deps = append(deps, dependent{dk, d})
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rv := storeRevision(tx)
	for _, d := range deps {
		if len(d.u.GetFinalizers()) > 0 {
			if d.u.GetDeletionTimestamp() == nil {
				now := metav1.NewTime(s.now().UTC().Truncate(time.Second))
				d.u.SetDeletionTimestamp(&now)
				d.u.SetGeneration(d.u.GetGeneration() + 1)
				d.u.SetResourceVersion(strconv.FormatUint(rv, 10))
				raw, err := d.u.MarshalJSON()
				if err != nil {
					return nil, err
				}
				if err := tx.Bucket(bucketObjects).Bucket(d.k.bucket()).Put(d.k.key(d.u.GetNamespace(), d.u.GetName()), raw); err != nil {
					return nil, err
				}
				events = append(events, Event{Type: watch.Modified, GVK: d.k.gvk, Key: nsName(d.u), Object: d.u})
			}
			continue
		}
		more, err := s.remove(tx, d.k, d.u)
		if err != nil {
			return nil, err
		}
		events = append(events, more...)
	}
	return events, nil
}

// DeleteAllOf deletes the objects of a kind that match the options.
func (s *Store) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	o := (&client.DeleteAllOfOptions{}).ApplyOptions(opts)
	gvk, err := s.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := s.List(ctx, list, &o.ListOptions); err != nil {
		return err
	}
	for i := range list.Items {
		if err := s.Delete(ctx, &list.Items[i], &o.DeleteOptions); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// Apply is server-side apply, which local mode does not offer.
func (s *Store) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return apierrors.NewBadRequest("server-side apply is not supported in local mode")
}

// Status is the status subresource.
func (s *Store) Status() client.SubResourceWriter { return statusWriter{s} }

// SubResource returns the named subresource; local mode has only status.
func (s *Store) SubResource(name string) client.SubResourceClient {
	if name == "status" {
		return statusWriter{s}
	}
	return unsupportedSubResource(name)
}

type statusWriter struct{ s *Store }

func (w statusWriter) Get(ctx context.Context, obj client.Object, sub client.Object, _ ...client.SubResourceGetOption) error {
	return w.s.Get(ctx, client.ObjectKeyFromObject(obj), sub)
}

func (w statusWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "status"}, "create")
}

func (w statusWriter) Update(_ context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	o := (&client.SubResourceUpdateOptions{}).ApplyOptions(opts)
	return w.s.update(obj, true, len(o.DryRun) > 0)
}

func (w statusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	o := (&client.SubResourcePatchOptions{}).ApplyOptions(opts)
	return w.s.patch(obj, patch, true, len(o.DryRun) > 0)
}

func (w statusWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return apierrors.NewBadRequest("server-side apply is not supported in local mode")
}

type unsupportedSubResource string

func (u unsupportedSubResource) err() error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: string(u)}, "")
}
func (u unsupportedSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return u.err()
}
func (u unsupportedSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return u.err()
}
func (u unsupportedSubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return u.err()
}
func (u unsupportedSubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return u.err()
}
func (u unsupportedSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return u.err()
}

// write runs fn in a write transaction with the next resourceVersion, then
// publishes its events. A dry run or a change-less write rolls back.
func (s *Store) write(dry bool, fn func(tx *bolt.Tx, rv uint64) ([]Event, error)) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var events []Event
	err := s.db.Update(func(tx *bolt.Tx) error {
		rv := storeRevision(tx) + 1
		evs, err := fn(tx, rv)
		if err != nil {
			return err
		}
		if dry {
			return errDryRun
		}
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], rv)
		if err := tx.Bucket(bucketMeta).Put(keyRevision, buf[:]); err != nil {
			return err
		}
		events = evs
		return nil
	})
	switch {
	case errors.Is(err, errDryRun), errors.Is(err, errNoChange):
		return nil
	case err != nil:
		return err
	}
	s.publish(events)
	return nil
}

var errDryRun = errors.New("dry run")

func storeRevision(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyRevision)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func conflict(k kindInfo, name string) error {
	return apierrors.NewConflict(k.resource, name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

func nsName(u *unstructured.Unstructured) types.NamespacedName {
	return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
}

func withoutMeta(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			out[k] = v
		}
	}
	return out
}

// toUnstructured is obj as JSON fields, with its apiVersion and kind set.
func toUnstructured(obj client.Object, k kindInfo) (*unstructured.Unstructured, error) {
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = runtime.DeepCopyJSON(u.Object)
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			// What the apiserver answers a body it cannot decode (a number
			// out of JSON's range in a payload, say): the caller's mistake.
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the %s cannot be stored: %v", k.gvk.Kind, err))
		}
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(k.gvk)
	return u, nil
}

func fromUnstructured(u *unstructured.Unstructured, obj client.Object) error {
	raw, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return decodeInto(raw, obj)
}

// decodeInto replaces obj's contents with the JSON document raw, so that
// fields absent from raw do not survive from obj's previous contents.
func decodeInto(raw []byte, obj runtime.Object) error {
	if u, ok := obj.(runtime.Unstructured); ok {
		return json.Unmarshal(raw, u)
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("%T is not a pointer to an object", obj)
	}
	v.Elem().Set(reflect.Zero(v.Elem().Type()))
	return json.Unmarshal(raw, obj)
}

func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}
