"""The Price List API served from the price table: products, filters, pages, errors."""

from __future__ import annotations

import json

from itbench_finops.prices import load_prices
from itbench_finops.pricing_api import answer, describe_services, get_attribute_values, get_products


def _price(product: str) -> float:
    terms = json.loads(product)["terms"]["OnDemand"]
    (term,) = terms.values()
    (dim,) = term["priceDimensions"].values()
    return float(dim["pricePerUnit"]["USD"])


def test_products_carry_the_price_table_prices() -> None:
    prices = load_prices()
    found = get_products(
        {
            "ServiceCode": "AmazonEC2",
            "Filters": [
                {"Type": "TERM_MATCH", "Field": "instanceType", "Value": "m5.large"},
                {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
            ],
        }
    )["PriceList"]
    assert len(found) == 1 and _price(found[0]) == prices.instance("m5.large").hourly
    rds = get_products(
        {"ServiceCode": "AmazonRDS", "Filters": [{"Field": "instanceType", "Value": "db.r5.large"}]}
    )["PriceList"]
    assert _price(rds[0]) == prices.database("db.r5.large").hourly
    gp3 = get_products(
        {
            "ServiceCode": "AmazonEC2",
            "Filters": [
                {"Field": "volumeApiName", "Value": "gp3"},
                {"Field": "productFamily", "Value": "Storage"},
            ],
        }
    )["PriceList"]
    assert _price(gp3[0]) == prices.raw["ebs_gb_month"]["gp3"]
    nat = get_products(
        {
            "ServiceCode": "AmazonEC2",
            "Filters": [{"Field": "usagetype", "Value": "NatGateway-Bytes"}],
        }
    )["PriceList"]
    assert _price(nat[0]) == prices.nat_gb


def test_pages_services_and_attribute_values() -> None:
    first = get_products({"ServiceCode": "AmazonEC2", "MaxResults": 5})
    assert len(first["PriceList"]) == 5 and first["NextToken"] == "5"
    second = get_products({"ServiceCode": "AmazonEC2", "MaxResults": 5, "NextToken": "5"})
    assert set(second["PriceList"]).isdisjoint(first["PriceList"])
    codes = {s["ServiceCode"] for s in describe_services({})["Services"]}
    assert {"AmazonEC2", "AmazonRDS", "AmazonS3", "AWSELB"} <= codes
    values = get_attribute_values({"ServiceCode": "AmazonEC2", "AttributeName": "instanceType"})
    assert {"Value": "m5.large"} in values["AttributeValues"]


def test_bad_requests_get_aws_errors() -> None:
    status, body = answer(
        "AWSPriceListService.GetProducts", b'{"ServiceCode": "AmazonEC2", "MaxResults": 500}'
    )
    assert status.startswith("400") and "MaxResults must be between 1 and 100" in body.decode()
    status, body = answer("AWSPriceListService.GetProducts", b"{}")
    assert status.startswith("400") and "ServiceCode is required" in body.decode()
    status, body = answer("AWSPriceListService.ListPriceLists", b"{}")
    assert "UnknownOperationException" in body.decode()
    status, body = answer(
        "AWSPriceListService.GetProducts",
        b'{"ServiceCode": "AmazonEC2", "Filters": [{"Type": "REGEX", "Field": "x", "Value": "y"}]}',
    )
    assert "Filter Type 'REGEX' is invalid (valid: TERM_MATCH" in body.decode()
