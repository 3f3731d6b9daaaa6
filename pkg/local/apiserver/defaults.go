package apiserver

import (
	"fmt"
	"io/fs"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/sless-dev/sless/config/crd"
)

// crdSchemas are the OpenAPI schemas of sless's CRDs by kind. The store
// applies their defaults on every create and spec write, as the apiserver
// does, so that an object reads back the same in local mode as on a
// cluster: a Function created without memoryMB shows 128 in both, and a
// merge patch that removes a defaulted field restores its default rather
// than leaving it unset. (The apiserver's own defaulting package would
// bring its CEL and feature-gate machinery into the sless binary; the
// walk below is the part of it these schemas need.)
var crdSchemas = sync.OnceValues(func() (map[schema.GroupVersionKind]*apiextensionsv1.JSONSchemaProps, error) {
	out := map[schema.GroupVersionKind]*apiextensionsv1.JSONSchemaProps{}
	files, err := fs.Glob(crd.Files, "*.yaml")
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		raw, err := crd.Files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &def); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", name, err)
		}
		for _, v := range def.Spec.Versions {
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				out[schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: def.Spec.Names.Kind}] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out, nil
})

// applyDefaults fills the CRD defaults of gvk into obj, an object's JSON
// map; kinds without a CRD of sless's are left as they are.
func applyDefaults(gvk schema.GroupVersionKind, obj map[string]any) error {
	schemas, err := crdSchemas()
	if err != nil {
		return fmt.Errorf("reading the CRD schemas: %w", err)
	}
	if s := schemas[gvk]; s != nil {
		return fillDefaults(obj, s)
	}
	return nil
}

// fillDefaults sets, in v, every field s gives a default that v lacks (or
// holds as null where the schema does not allow null), at every depth: an
// object's properties and additional properties, an array's items. Like the
// apiserver, it fills only inside objects that are present.
func fillDefaults(v any, s *apiextensionsv1.JSONSchemaProps) error {
	switch v := v.(type) {
	case map[string]any:
		for name := range s.Properties {
			prop := s.Properties[name]
			if prop.Default == nil {
				continue
			}
			if cur, ok := v[name]; !ok || (cur == nil && !prop.Nullable) {
				// apimachinery's json keeps whole numbers int64, as the
				// store's objects hold them.
				var d any
				if err := json.Unmarshal(prop.Default.Raw, &d); err != nil {
					return fmt.Errorf("default of %s: %w", name, err)
				}
				v[name] = d
			}
		}
		for name, child := range v {
			if prop, ok := s.Properties[name]; ok {
				if err := fillDefaults(child, &prop); err != nil {
					return err
				}
			} else if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
				if err := fillDefaults(child, ap.Schema); err != nil {
					return err
				}
			}
		}
	case []any:
		if s.Items == nil || s.Items.Schema == nil {
			return nil
		}
		for _, item := range v {
			if err := fillDefaults(item, s.Items.Schema); err != nil {
				return err
			}
		}
	}
	return nil
}
