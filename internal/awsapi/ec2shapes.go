package awsapi

import (
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// The XML shapes of EC2's answers, element for element as the SDKs read
// them (aws-sdk-go-v2/service/ec2's deserializers). A list is a set
// element of <item>s, present even when empty.

type set[T any] struct {
	Items []T `xml:"item"`
}

func setOf[T any](items []T) set[T] { return set[T]{Items: items} }

// ec2Time is EC2's timestamp form.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type offeringXML struct {
	ID               string `xml:"capacityBlockOfferingId"`
	InstanceType     string `xml:"instanceType"`
	AvailabilityZone string `xml:"availabilityZone"`
	InstanceCount    int    `xml:"instanceCount"`
	StartDate        string `xml:"startDate"`
	EndDate          string `xml:"endDate"`
	DurationHours    int    `xml:"capacityBlockDurationHours"`
	DurationMinutes  int    `xml:"capacityBlockDurationMinutes"`
	UpfrontFee       string `xml:"upfrontFee"`
	CurrencyCode     string `xml:"currencyCode"`
	Tenancy          string `xml:"tenancy"`
}

type reservationXML struct {
	ID                     string      `xml:"capacityReservationId"`
	OwnerID                string      `xml:"ownerId"`
	InstanceType           string      `xml:"instanceType"`
	InstancePlatform       string      `xml:"instancePlatform"`
	AvailabilityZone       string      `xml:"availabilityZone"`
	Tenancy                string      `xml:"tenancy"`
	TotalInstanceCount     int         `xml:"totalInstanceCount"`
	AvailableInstanceCount int         `xml:"availableInstanceCount"`
	EBSOptimized           bool        `xml:"ebsOptimized"`
	EphemeralStorage       bool        `xml:"ephemeralStorage"`
	State                  string      `xml:"state"`
	StartDate              string      `xml:"startDate"`
	EndDate                string      `xml:"endDate"`
	EndDateType            string      `xml:"endDateType"`
	InstanceMatchCriteria  string      `xml:"instanceMatchCriteria"`
	CreateDate             string      `xml:"createDate"`
	Tags                   set[tagXML] `xml:"tagSet"`
	ReservationType        string      `xml:"reservationType"`
	CapacityBlockID        string      `xml:"capacityBlockId"`
}

type capacityBlockXML struct {
	ID               string      `xml:"capacityBlockId"`
	ReservationIDs   set[string] `xml:"capacityReservationIdSet"`
	AvailabilityZone string      `xml:"availabilityZone"`
	CreateDate       string      `xml:"createDate"`
	StartDate        string      `xml:"startDate"`
	EndDate          string      `xml:"endDate"`
	State            string      `xml:"state"`
	Tags             set[tagXML] `xml:"tagSet"`
}

type capacityCounts struct {
	Total       int `xml:"totalCapacity"`
	Available   int `xml:"totalAvailableCapacity"`
	Unavailable int `xml:"totalUnavailableCapacity"`
}

type reservationStatusXML struct {
	ID string `xml:"capacityReservationId"`
	capacityCounts
}

type blockStatusXML struct {
	ID                 string `xml:"capacityBlockId"`
	InterconnectStatus string `xml:"interconnectStatus"`
	capacityCounts
	Reservations set[reservationStatusXML] `xml:"capacityReservationStatusSet"`
}

type extensionOfferingXML struct {
	ID               string `xml:"capacityBlockExtensionOfferingId"`
	InstanceType     string `xml:"instanceType"`
	InstanceCount    int    `xml:"instanceCount"`
	AvailabilityZone string `xml:"availabilityZone"`
	StartDate        string `xml:"startDate"`
	ExtensionStart   string `xml:"capacityBlockExtensionStartDate"`
	ExtensionEnd     string `xml:"capacityBlockExtensionEndDate"`
	DurationHours    int    `xml:"capacityBlockExtensionDurationHours"`
	UpfrontFee       string `xml:"upfrontFee"`
	CurrencyCode     string `xml:"currencyCode"`
	Tenancy          string `xml:"tenancy"`
}

type extensionXML struct {
	ReservationID    string `xml:"capacityReservationId"`
	InstanceType     string `xml:"instanceType"`
	InstanceCount    int    `xml:"instanceCount"`
	AvailabilityZone string `xml:"availabilityZone"`
	OfferingID       string `xml:"capacityBlockExtensionOfferingId"`
	DurationHours    int    `xml:"capacityBlockExtensionDurationHours"`
	Status           string `xml:"capacityBlockExtensionStatus"`
	PurchaseDate     string `xml:"capacityBlockExtensionPurchaseDate"`
	StartDate        string `xml:"capacityBlockExtensionStartDate"`
	EndDate          string `xml:"capacityBlockExtensionEndDate"`
	UpfrontFee       string `xml:"upfrontFee"`
	CurrencyCode     string `xml:"currencyCode"`
}

// The answers of the actions.

type describeOfferingsResponse struct {
	RequestID string           `xml:"requestId"`
	Offerings set[offeringXML] `xml:"capacityBlockOfferingSet"`
}

type purchaseResponse struct {
	RequestID   string                `xml:"requestId"`
	Reservation reservationXML        `xml:"capacityReservation"`
	Blocks      set[capacityBlockXML] `xml:"capacityBlockSet"`
}

type describeReservationsResponse struct {
	RequestID    string              `xml:"requestId"`
	Reservations set[reservationXML] `xml:"capacityReservationSet"`
}

type describeBlocksResponse struct {
	RequestID string                `xml:"requestId"`
	Blocks    set[capacityBlockXML] `xml:"capacityBlockSet"`
}

type describeStatusResponse struct {
	RequestID string              `xml:"requestId"`
	Statuses  set[blockStatusXML] `xml:"capacityBlockStatusSet"`
}

type describeExtensionOfferingsResponse struct {
	RequestID string                    `xml:"requestId"`
	Offerings set[extensionOfferingXML] `xml:"capacityBlockExtensionOfferingSet"`
}

type extensionsResponse struct {
	RequestID  string            `xml:"requestId"`
	Extensions set[extensionXML] `xml:"capacityBlockExtensionSet"`
}

type cancelResponse struct {
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

// The conversions from capblock's terms.

func (c *ec2Call) awsType(name string) string {
	return AWSName(c.fleet, name, "")
}

func (c *ec2Call) offering(o core.Offering) offeringXML {
	return offeringXML{
		ID: o.ID, InstanceType: c.awsType(o.InstanceType), AvailabilityZone: o.Zone, InstanceCount: o.Count,
		StartDate: ec2Time(o.Start), EndDate: ec2Time(o.End), DurationHours: o.DurationHours(),
		UpfrontFee: o.Fee.String(), CurrencyCode: o.Fee.Currency, Tenancy: "default",
	}
}

func tagsOf(b core.Block) set[tagXML] {
	tags := make([]tagXML, 0, len(b.Tags))
	for _, k := range sortedKeys(b.Tags) {
		tags = append(tags, tagXML{Key: k, Value: b.Tags[k]})
	}
	return setOf(tags)
}

// reservation is a block as EC2 shows a capacity block's reservation:
// its id is the block's, and so is its capacity block's.
func (c *ec2Call) reservation(b core.Block) reservationXML {
	available := 0
	if b.State == core.StateActive {
		available = b.Count
	}
	return reservationXML{
		ID: b.ID, OwnerID: b.Team, InstanceType: c.awsType(b.InstanceType), InstancePlatform: "Linux/UNIX",
		AvailabilityZone: b.Zone, Tenancy: "default", TotalInstanceCount: b.Count, AvailableInstanceCount: available,
		State: string(b.State), StartDate: ec2Time(b.Start), EndDate: ec2Time(b.End), EndDateType: "limited",
		InstanceMatchCriteria: "targeted", CreateDate: ec2Time(b.CreatedAt), Tags: tagsOf(b),
		ReservationType: "capacity-block", CapacityBlockID: b.ID,
	}
}

func capacityBlock(b core.Block) capacityBlockXML {
	return capacityBlockXML{
		ID: b.ID, ReservationIDs: setOf([]string{b.ID}), AvailabilityZone: b.Zone,
		CreateDate: ec2Time(b.CreatedAt), StartDate: ec2Time(b.Start), EndDate: ec2Time(b.End),
		State: string(b.State), Tags: tagsOf(b),
	}
}

func blockStatus(id string, st contract.BlockStatus) blockStatusXML {
	counts := capacityCounts{Total: st.Total, Available: st.Available, Unavailable: st.Unavailable}
	interconnect := "ok"
	if st.Degraded {
		interconnect = "impaired"
	}
	return blockStatusXML{
		ID: id, InterconnectStatus: interconnect, capacityCounts: counts,
		Reservations: setOf([]reservationStatusXML{{ID: id, capacityCounts: counts}}),
	}
}

func (c *ec2Call) extensionOffering(b core.Block, o core.Offering) extensionOfferingXML {
	return extensionOfferingXML{
		ID: o.ID, InstanceType: c.awsType(b.InstanceType), InstanceCount: b.Count, AvailabilityZone: b.Zone,
		StartDate: ec2Time(b.Start), ExtensionStart: ec2Time(o.Start), ExtensionEnd: ec2Time(o.End),
		DurationHours: o.DurationHours(), UpfrontFee: o.Fee.String(), CurrencyCode: o.Fee.Currency, Tenancy: "default",
	}
}
