package awsapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"capblock/internal/awsapi"
	"capblock/internal/awsapi/sagemaker"
	"capblock/internal/service"
)

// TestReplayWithAnotherTarget: a DescribeTrainingJob signed without its
// X-Amz-Target, as a client that signs only host and x-amz-date would,
// and sent with the target StopTrainingJob, is refused as unsigned
// (the body, path and time are the same for both calls), and the job
// runs on.
func TestReplayWithAnotherTarget(t *testing.T) {
	e := newEnvWith(t, awsapi.Options{}, func(svc *service.Service) awsapi.JSONService {
		return sagemaker.New(svc.Guarded(), svc.Now, sagemaker.Options{
			InstanceType: func(n string) (string, bool) { return "h100.8x", n == "ml.p5.48xlarge" },
			AWSName:      func(string) string { return "ml.p5.48xlarge" },
		})
	})
	ctx := t.Context()
	c := sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url + "/aws"),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: memberKey, SecretAccessKey: secretOf(memberKey)}, nil
		})})

	// 1. A plan that starts later, and a job waiting on it.
	offers, err := c.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
		InstanceType: "ml.p5.48xlarge", InstanceCount: aws.Int32(1), DurationHours: aws.Int64(4),
		StartTimeAfter: aws.Time(t0.Add(24 * time.Hour)), EndTimeBefore: aws.Time(t0.Add(7 * 24 * time.Hour)),
		TargetResources: []smtypes.SageMakerResourceName{smtypes.SageMakerResourceNameTrainingJob},
	})
	if err != nil || len(offers.TrainingPlanOfferings) == 0 {
		t.Fatalf("SearchTrainingPlanOfferings: %v", err)
	}
	plan, err := c.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String("train"),
		TrainingPlanOfferingId: offers.TrainingPlanOfferings[0].TrainingPlanOfferingId})
	if err != nil {
		t.Fatalf("CreateTrainingPlan: %v", err)
	}
	if _, err := c.CreateTrainingJob(ctx, &sm.CreateTrainingJobInput{
		TrainingJobName: aws.String("fit"), RoleArn: aws.String("arn:aws:iam::123456789012:role/unused"),
		AlgorithmSpecification: &smtypes.AlgorithmSpecification{TrainingInputMode: smtypes.TrainingInputModeFile,
			TrainingImage: aws.String("ignored:latest"), ContainerEntrypoint: []string{"true"}},
		OutputDataConfig: &smtypes.OutputDataConfig{S3OutputPath: aws.String("s3://unused/out")},
		ResourceConfig: &smtypes.ResourceConfig{InstanceType: smtypes.TrainingInstanceTypeMlP548xlarge, InstanceCount: aws.Int32(1),
			VolumeSizeInGB: aws.Int32(100), TrainingPlanArn: plan.TrainingPlanArn},
		StoppingCondition: &smtypes.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(3600)},
	}); err != nil {
		t.Fatalf("CreateTrainingJob: %v", err)
	}

	// 2. The captured DescribeTrainingJob, its target unsigned, sent as
	//    StopTrainingJob.
	const body = `{"TrainingJobName":"fit"}`
	r, err := http.NewRequest(http.MethodPost, e.url+"/aws/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: memberKey, SecretAccessKey: secretOf(memberKey)}
	if err := v4.NewSigner().SignHTTP(ctx, creds, r, hex.EncodeToString(sum[:]), "sagemaker", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if signed := r.Header.Get("Authorization"); strings.Contains(signed, "x-amz-target") {
		t.Fatalf("the target is signed: %s", signed)
	}
	r.Header.Set("X-Amz-Target", "SageMaker.StopTrainingJob")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("the answer is not JSON: %v", err)
	}
	if resp.StatusCode != http.StatusBadRequest || out["__type"] != "InvalidSignatureException" || !strings.Contains(out["message"], "x-amz-target") {
		t.Errorf("the replay as StopTrainingJob: %d %v; want 400 InvalidSignatureException naming x-amz-target", resp.StatusCode, out)
	}

	// 3. The job was not stopped.
	d, err := c.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String("fit")})
	if err != nil {
		t.Fatalf("DescribeTrainingJob: %v", err)
	}
	if d.TrainingJobStatus != smtypes.TrainingJobStatusInProgress {
		t.Errorf("the job is %s, want InProgress", d.TrainingJobStatus)
	}
}
