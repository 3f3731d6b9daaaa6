package api

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names/blobkey"
)

// kind describes one resource of the API so the CRUD handlers are written
// once for Functions, Triggers, FunctionJobs, SlessServices and IoTDevices.
type kind struct {
	// plural is the path segment ("functions") and kind the object's Kind.
	plural, kind string
	// dns1035 names must start with a letter (Functions: they become
	// Knative Service names); others are DNS-1123 labels.
	dns1035 bool
	maxName int
	newObj  func() client.Object
	newList func() client.ObjectList
	// items returns a list's objects.
	items func(client.ObjectList) []client.Object
	// validate is the shared validation of pkg/apis (one function, two callers).
	validate func(client.Object) field.ErrorList
	// copyUser copies what a user may set (spec) from src to dst and clears
	// dst's status, which users never write.
	copyUser func(dst, src client.Object)
	// built is set for the kinds built from source that take uploads.
	built *builtKind
}

// builtKind is what the upload routes need of a kind built from source
// (Functions, SlessServices): where its blobs lie and how an upload sets
// its code. Reads go through slessv1alpha1.Workload.
type builtKind struct {
	sourceKey, contextKey func(ns, name, hex string) string
	// setBuild sets the runtime, the entrypoint and the source.
	setBuild func(obj client.Object, runtime, entrypoint string, src slessv1alpha1.FunctionSource)
}

var (
	functions = &kind{
		plural: "functions", kind: "Function", dns1035: true, maxName: slessv1alpha1.MaxNameLength,
		newObj:  func() client.Object { return &slessv1alpha1.Function{} },
		newList: func() client.ObjectList { return &slessv1alpha1.FunctionList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*slessv1alpha1.FunctionList).Items)
		},
		validate: func(o client.Object) field.ErrorList {
			return slessv1alpha1.ValidateFunction(o.(*slessv1alpha1.Function))
		},
		copyUser: func(dst, src client.Object) {
			d, s := dst.(*slessv1alpha1.Function), src.(*slessv1alpha1.Function)
			d.Spec = *s.Spec.DeepCopy()
			d.Status = slessv1alpha1.FunctionStatus{}
		},
		built: &builtKind{
			sourceKey: blobkey.Source, contextKey: blobkey.Context,
			setBuild: func(o client.Object, rt, ep string, src slessv1alpha1.FunctionSource) {
				fn := o.(*slessv1alpha1.Function)
				fn.Spec.Runtime, fn.Spec.Entrypoint, fn.Spec.Source = rt, ep, src
			},
		},
	}
	triggers = &kind{
		plural: "triggers", kind: "Trigger", maxName: slessv1alpha1.MaxNameLength,
		newObj:  func() client.Object { return &slessv1alpha1.Trigger{} },
		newList: func() client.ObjectList { return &slessv1alpha1.TriggerList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*slessv1alpha1.TriggerList).Items)
		},
		validate: func(o client.Object) field.ErrorList {
			return slessv1alpha1.ValidateTrigger(o.(*slessv1alpha1.Trigger))
		},
		copyUser: func(dst, src client.Object) {
			d, s := dst.(*slessv1alpha1.Trigger), src.(*slessv1alpha1.Trigger)
			d.Spec = *s.Spec.DeepCopy()
			d.Status = slessv1alpha1.TriggerStatus{}
		},
	}
	jobs = &kind{
		plural: "jobs", kind: "FunctionJob", maxName: 40,
		newObj:  func() client.Object { return &slessv1alpha1.FunctionJob{} },
		newList: func() client.ObjectList { return &slessv1alpha1.FunctionJobList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*slessv1alpha1.FunctionJobList).Items)
		},
		validate: func(o client.Object) field.ErrorList {
			return slessv1alpha1.ValidateFunctionJob(o.(*slessv1alpha1.FunctionJob))
		},
		copyUser: func(dst, src client.Object) {
			d, s := dst.(*slessv1alpha1.FunctionJob), src.(*slessv1alpha1.FunctionJob)
			d.Spec = *s.Spec.DeepCopy()
			d.Status = slessv1alpha1.FunctionJobStatus{}
		},
	}
	services = &kind{
		plural: "services", kind: "SlessService", dns1035: true, maxName: slessv1alpha1.MaxNameLength,
		newObj:  func() client.Object { return &slessv1alpha1.SlessService{} },
		newList: func() client.ObjectList { return &slessv1alpha1.SlessServiceList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*slessv1alpha1.SlessServiceList).Items)
		},
		validate: func(o client.Object) field.ErrorList {
			return slessv1alpha1.ValidateSlessService(o.(*slessv1alpha1.SlessService))
		},
		copyUser: func(dst, src client.Object) {
			d, s := dst.(*slessv1alpha1.SlessService), src.(*slessv1alpha1.SlessService)
			d.Spec = *s.Spec.DeepCopy()
			d.Status = slessv1alpha1.FunctionStatus{}
		},
		built: &builtKind{
			sourceKey: blobkey.ServiceSource, contextKey: blobkey.ServiceContext,
			setBuild: func(o client.Object, rt, ep string, src slessv1alpha1.FunctionSource) {
				svc := o.(*slessv1alpha1.SlessService)
				svc.Spec.Runtime, svc.Spec.Entrypoint, svc.Spec.Source = rt, ep, src
			},
		},
	}
	iotDevices = &kind{
		plural: "devices", kind: "IoTDevice", maxName: slessv1alpha1.MaxDeviceNameLength,
		newObj:  func() client.Object { return &slessv1alpha1.IoTDevice{} },
		newList: func() client.ObjectList { return &slessv1alpha1.IoTDeviceList{} },
		items: func(l client.ObjectList) []client.Object {
			return objects(l.(*slessv1alpha1.IoTDeviceList).Items)
		},
		validate: func(o client.Object) field.ErrorList {
			return slessv1alpha1.ValidateIoTDevice(o.(*slessv1alpha1.IoTDevice))
		},
		copyUser: func(dst, src client.Object) {
			d, s := dst.(*slessv1alpha1.IoTDevice), src.(*slessv1alpha1.IoTDevice)
			d.Spec = *s.Spec.DeepCopy()
			d.Status = slessv1alpha1.IoTDeviceStatus{}
		},
	}
	allKinds = []*kind{functions, triggers, jobs, services, iotDevices}
)

// objects points at each item of a typed list as a client.Object.
func objects[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}
