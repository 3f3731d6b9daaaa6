package resources

import (
	"time"

	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sless-dev/sless/pkg/adapter"
	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/names"
)

// MakePipelineRun builds the PipelineRun that turns the build context at
// in.Location into an image pushed to the function's repository. The
// pipeline is embedded, so nothing but Tekton itself must be installed: a
// helper step records IMAGE_URL, then the builder (kaniko's flags) fetches
// the context from S3, builds its Dockerfile and writes the pushed digest as
// IMAGE_DIGEST. Parameters carry every input, so the pipeline text is the
// same for every function and user input never reaches a script. attempt
// is the names.PipelineRun attempt: 0 unless earlier runs of the digest
// were cancelled as superseded or failed before a rebuild was asked for.
func MakePipelineRun(fn slessv1alpha1.Workload, in adapter.BuildInput, attempt int, cfg Config) *tektonv1.PipelineRun {
	cfg = cfg.WithDefaults()
	timeout := time.Duration(fn.BuildTimeout()) * time.Second
	labels := Labels(fn)
	annotations := map[string]string{AnnotationSourceDigest: in.Digest}
	if fn.BuildSpec().Rebuild != "" {
		annotations[AnnotationRebuild] = fn.BuildSpec().Rebuild
	}
	return &tektonv1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{
			Name:            names.PipelineRun(fn, in.Digest, attempt),
			Namespace:       fn.GetNamespace(),
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(fn)},
		},
		Spec: tektonv1.PipelineRunSpec{
			Params: tektonv1.Params{
				stringParam(ParamContext, in.Location),
				stringParam(ParamContextDigest, in.Digest),
				stringParam(ParamImage, names.ImageRepository(cfg.Registry, fn)),
				stringParam(ParamTag, names.ImageTag(in.Digest)),
			},
			Timeouts:        &tektonv1.TimeoutFields{Pipeline: &metav1.Duration{Duration: timeout}},
			TaskRunTemplate: tektonv1.PipelineTaskRunTemplate{ServiceAccountName: cfg.BuildServiceAccount},
			PipelineSpec:    buildPipeline(cfg),
		},
	}
}

func stringParam(name, value string) tektonv1.Param {
	return tektonv1.Param{Name: name, Value: *tektonv1.NewStructuredValues(value)}
}

func paramSpecs(names ...string) tektonv1.ParamSpecs {
	out := make(tektonv1.ParamSpecs, len(names))
	for i, n := range names {
		out[i] = tektonv1.ParamSpec{Name: n, Type: tektonv1.ParamTypeString}
	}
	return out
}

func buildPipeline(cfg Config) *tektonv1.PipelineSpec {
	params := []string{ParamContext, ParamContextDigest, ParamImage, ParamTag}
	var taskParams tektonv1.Params
	for _, p := range params {
		taskParams = append(taskParams, stringParam(p, "$(params."+p+")"))
	}
	return &tektonv1.PipelineSpec{
		Params: paramSpecs(params...),
		Results: []tektonv1.PipelineResult{
			{Name: ResultImageDigest, Type: tektonv1.ResultsTypeString, Value: *tektonv1.NewStructuredValues("$(tasks." + BuildTask + ".results." + ResultImageDigest + ")")},
			{Name: ResultImageURL, Type: tektonv1.ResultsTypeString, Value: *tektonv1.NewStructuredValues("$(tasks." + BuildTask + ".results." + ResultImageURL + ")")},
		},
		Tasks: []tektonv1.PipelineTask{{
			Name:     BuildTask,
			Params:   taskParams,
			TaskSpec: &tektonv1.EmbeddedTask{TaskSpec: buildTask(cfg, params)},
		}},
	}
}

func buildTask(cfg Config, params []string) tektonv1.TaskSpec {
	args := []string{
		"--dockerfile=Dockerfile",
		"--context=$(params." + ParamContext + ")",
		"--destination=$(params." + ParamImage + "):$(params." + ParamTag + ")",
		"--digest-file=$(results." + ResultImageDigest + ".path)",
	}
	args = append(args, cfg.BuilderArgs...)

	// kaniko reads an s3:// context with the AWS SDK: the endpoint and
	// path-style addressing make it work with MinIO, Ceph and other S3 servers.
	env := []corev1.EnvVar{{Name: "AWS_REGION", Value: cfg.S3Region}}
	if cfg.S3Endpoint != "" {
		env = append(env,
			corev1.EnvVar{Name: "S3_ENDPOINT", Value: cfg.S3Endpoint},
			corev1.EnvVar{Name: "S3_FORCE_PATH_STYLE", Value: "true"})
	}
	if cfg.S3Secret != "" {
		for _, key := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			env = append(env, corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cfg.S3Secret}, Key: key,
			}}})
		}
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if cfg.RegistrySecret != "" {
		env = append(env, corev1.EnvVar{Name: "DOCKER_CONFIG", Value: DockerConfigDir})
		volumes = append(volumes, corev1.Volume{Name: "registry-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: cfg.RegistrySecret,
			Items:      []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "registry-credentials", MountPath: DockerConfigDir, ReadOnly: true})
	}
	return tektonv1.TaskSpec{
		Params: paramSpecs(params...),
		Results: []tektonv1.TaskResult{
			{Name: ResultImageDigest, Type: tektonv1.ResultsTypeString, Description: "digest of the pushed image, sha256:<hex>"},
			{Name: ResultImageURL, Type: tektonv1.ResultsTypeString, Description: "repository the image was pushed to"},
		},
		Volumes: volumes,
		Steps: []tektonv1.Step{
			{
				Name:  StepImageURL,
				Image: cfg.HelperImage,
				Env:   []corev1.EnvVar{{Name: "IMAGE", Value: "$(params." + ParamImage + ")"}},
				// The repository comes through the environment, not the
				// script text, so no value is ever parsed by the shell.
				Script: "#!/bin/sh\nset -eu\nprintf '%s' \"$IMAGE\" > \"$(results." + ResultImageURL + ".path)\"\n",
			},
			{
				Name:         StepBuild,
				Image:        cfg.BuilderImage,
				Command:      []string{cfg.BuilderCommand},
				Args:         args,
				Env:          env,
				VolumeMounts: mounts,
			},
		},
	}
}
